"""The benchmark with the real engine: Ray Serve's paths against a bare vLLM server.

With vLLM's CPU build as the engine, the physical limit of this machine is a bare
`vllm.entrypoints.openai.api_server` (no Ray, no proxy) running the same tiny model with the same
engine arguments; the fast path is measured against it on the same requests in the same run, with
the same number of engine processes (one). The router comparison needs two replicas, and reads its
hit rates from vLLM's own usage (`prompt_tokens_details.cached_tokens`).

`python -m vllm.entrypoints.openai.api_server` rather than `vllm serve`: the CPU build is installed
without the `vllm` distribution's metadata the console script looks for.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from serving.compile.compiler import compile
from serving.compile.patterns import llm_configs_of
from serving.local.bench.prefix import precise_pairs, precise_variant, router_figures
from serving.local.bench.runner import Variant, VariantStartError
from serving.local.bench.stats import Pair, WorkloadReport, pair_ratios
from serving.local.bench.workloads import SHARED_PREFIX_WORKLOADS
from serving.local.engine.tiny_models import tiny_model
from serving.local.runtime import cleanup, places
from serving.local.runtime.app import engine_workers, tiny_family, vllm_engine_kwargs, vllm_env
from serving.local.runtime.ports import held_ports
from serving.paths import CODE_ROOT
from serving.plan.planner import plan
from serving.spec.profile import ModelSpec

BARE = "bare-vllm"
FAST_ONE = "fast-paths-on/power-of-two/1-replica"
SLOW_ONE = "fast-paths-off/power-of-two/1-replica"
POWER_TWO = "fast-paths-on/power-of-two"
SERVESTACK = "fast-paths-on/servestack-prefix-affinity"


def vllm_variants() -> list[Variant]:
    """Bare vLLM, the fast path and Serve's default path on one engine each (decode-heavy), and
    the routers on two replicas (multi-prompt, hot-prompt)."""
    return [
        Variant(name=BARE, fast_paths=True, router="power_of_two", workloads=("decode-heavy",),
                replicas=1, bare_vllm=True),
        Variant(name=FAST_ONE, fast_paths=True, router="power_of_two",
                workloads=("decode-heavy",), replicas=1),
        Variant(name=SLOW_ONE, fast_paths=False, router="power_of_two",
                workloads=("decode-heavy",), replicas=1),
        # The precise router first: the newest configuration fails, if any does, before the
        # others have spent their time.
        precise_variant().model_copy(update={"replicas": 2}),
        Variant(name=POWER_TWO, fast_paths=True, router="power_of_two",
                workloads=SHARED_PREFIX_WORKLOADS, replicas=2),
        Variant(name=SERVESTACK, fast_paths=True, router="servestack_prefix_affinity",
                workloads=SHARED_PREFIX_WORKLOADS, replicas=2),
    ]  # fmt: skip


def vllm_pairs() -> dict[str, Pair]:
    """The real engine's comparisons: the paths against bare vLLM and each other on one engine;
    the routers on two replicas."""
    pairs = {
        "decode-heavy: fast path/bare vLLM, requests/s": Pair(
            (FAST_ONE, "decode-heavy"), (BARE, "decode-heavy")
        ),
        "decode-heavy: fast paths off/bare vLLM, requests/s": Pair(
            (SLOW_ONE, "decode-heavy"), (BARE, "decode-heavy")
        ),
        "decode-heavy: fast paths on/off, requests/s": Pair(
            (FAST_ONE, "decode-heavy"), (SLOW_ONE, "decode-heavy")
        ),
    }
    for workload in SHARED_PREFIX_WORKLOADS:
        pairs[f"{workload}: servestack router/power of two, requests/s"] = Pair(
            (SERVESTACK, workload), (POWER_TWO, workload)
        )
    return pairs | precise_pairs(POWER_TWO, SERVESTACK)


def vllm_ratios(reports: Sequence[WorkloadReport]) -> dict[str, float]:
    by = {(r.variant, r.workload): r for r in reports}
    found = pair_ratios(reports, vllm_pairs())
    for label, variant in (("power of two", POWER_TWO), ("servestack router", SERVESTACK)):
        for workload in SHARED_PREFIX_WORKLOADS:
            if (variant, workload) in by:
                found[f"{workload}: {label} cache hit rate (vLLM)"] = by[
                    (variant, workload)
                ].cache_hit_rate
    return found | router_figures(reports)


def cli_args(kwargs: Mapping[str, Any]) -> list[str]:
    """Engine keyword arguments as vLLM's command line spells them."""
    import json

    args: list[str] = []
    for key, value in kwargs.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            args.append(flag)
        elif value is False:
            args.append("--no-" + key.replace("_", "-"))
        elif isinstance(value, dict | list):
            args += [flag, json.dumps(value)]
        else:
            args += [flag, str(value)]
    return args


def bare_command(spec: ModelSpec, model: Path, port: int) -> list[str]:
    """The bare server: the compiled engine arguments of the spec's (only) LLMConfig, changed for
    the CPU build exactly as the Serve application's are."""
    configs = llm_configs_of(compile(spec, plan(spec)).application["args"])
    if len(configs) != 1:
        raise ValueError("a bare vLLM server serves one LLMConfig; this spec compiles to several")
    kwargs = vllm_engine_kwargs(configs[0][1]["engine_kwargs"])
    return [sys.executable, "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(model), "--served-model-name", spec.name,
            "--host", "127.0.0.1", "--port", str(port), *cli_args(kwargs)]  # fmt: skip


@contextlib.contextmanager
def running_bare_vllm(
    spec: ModelSpec, log_path: Path, ready_timeout_s: float = 900.0
) -> Iterator[str]:
    """Start a bare vLLM server for the spec; yield its endpoint; stop it and whatever it
    started."""
    with held_ports(1) as (port,):
        command = bare_command(spec, tiny_model(tiny_family(spec)), port)
        workers = engine_workers(compile(spec, plan(spec)))
        env = os.environ | vllm_env(workers) | {"PYTHONPATH": str(CODE_ROOT)}
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with places.run_directory("vllm") as run_dir, log_path.open("w") as log:
            env |= places.run_dir_env(run_dir)
            with cleanup.supervised(
                command, env=env, stdout=log, stderr=subprocess.STDOUT
            ) as child:
                endpoint = f"http://127.0.0.1:{port}"
                _wait_bare(child.process, endpoint, ready_timeout_s, log_path)
                yield endpoint


def _wait_bare(
    process: subprocess.Popen[bytes], endpoint: str, timeout_s: float, log_path: Path
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        with (
            contextlib.suppress(urllib.error.URLError, OSError),
            urllib.request.urlopen(f"{endpoint}/v1/models", timeout=5),
        ):
            return
        time.sleep(1.0)
    tail = log_path.read_text(errors="replace").strip().splitlines()[-5:]
    state = "exited" if process.poll() is not None else f"not ready after {timeout_s:.0f} s"
    raise VariantStartError(f"the bare vLLM server {state}; {log_path}: " + " | ".join(tail))
