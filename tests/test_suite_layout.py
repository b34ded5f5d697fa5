"""The suite as `.ci/run` runs it: two xdist workers, the tests that start a local Ray kept on
one of them (tests/conftest.py). Were the grouping lost, two Rays would start side by side on two
cores, each local run's check of what it left in /tmp would see the other's run, and nothing else
would say so: pytest 9.2 with pytest-xdist 3.8 once dropped it silently."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from repo import REPO
from suite_groups import in_local_ray_group

# A module of the group that starts no Ray itself: quick, and many enough to be split were it not
# grouped.
GROUPED = "tests/serving/local/runtime/test_local_places.py"
# What a module calls to start the local runtime (a local Ray, vLLM's CPU build or its server).
STARTS_LOCAL_RUNTIME = re.compile(
    r"\b(running_variant|local_serve|run_variant|run_routers|serve_until_stopped|sweep)\(|"
    r"\bvllm_serve_support\b|servestack_serve_local"
)
OTHER = "tests/infra/kube/test_edge.py"


def test_the_local_ray_tests_run_on_one_worker() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2",
         "--dist", "loadgroup", "-v", GROUPED, OTHER],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:]
    ran = re.findall(r"^\[(gw\d+)\] .*? PASSED (\S+?)::", result.stdout, re.MULTILINE)
    workers = {module: {w for w, m in ran if m.startswith(module)} for module in (GROUPED, OTHER)}
    assert len(workers[GROUPED]) == 1, workers
    assert workers[OTHER], result.stdout[-3000:]


def test_every_module_that_starts_the_local_runtime_is_in_the_group() -> None:
    tests = REPO / "tests"
    starting = [
        path
        for path in sorted(tests.rglob("test_*.py"))
        if path != Path(__file__) and STARTS_LOCAL_RUNTIME.search(path.read_text())
    ]
    assert len(starting) >= 6, starting  # the search still finds the modules it is for
    left_out = [str(p.relative_to(REPO)) for p in starting if not in_local_ray_group(p)]
    assert left_out == []
