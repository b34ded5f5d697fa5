"""Which test modules run in the local-Ray xdist group (tests/conftest.py marks them; the suite's
layout test checks the list). A module of its own: `conftest` is a name several test folders
use, so another module importing it may get the wrong one."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).parent
# The tests that start a local Ray (and vLLM's CPU build) behind real Ray Serve, or time a load
# generator on loaded cores: under xdist they are one group, run one after another on one
# worker. Two Rays on two cores starve each other's start-up, and a module's tests share the one
# Ray its fixture started. The local plane's other tests (no Ray) run on either worker: the
# group is the suite's longest line. tests/test_suite_layout.py checks no module that starts
# the local runtime is left out.
LOCAL_RAY_TESTS = (
    "serving/local/bench/test_loadgen.py",
    "serving/local/bench/test_local_precise_router.py",
    "serving/local/bench/test_local_router.py",
    "serving/local/bench/test_local_vllm_bench.py",
    "serving/local/engine/test_local_vllm",
    "serving/local/faults/",
    "serving/local/runtime/test_local_e2e.py",
    "serving/local/runtime/test_local_places.py",
    "serving/observability/test_metrics_live.py",
    "infra/cli/test_bench_progress.py",
)


def in_local_ray_group(path: Path) -> bool:
    """Whether the test module at `path` runs in the local-Ray group."""
    return path.relative_to(TESTS).as_posix().startswith(LOCAL_RAY_TESTS)
