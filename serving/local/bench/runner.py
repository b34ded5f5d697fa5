"""The local benchmark: one model's application under several configurations, side by side.

Each configuration (fast paths on or off, a router) is the profile's spec with that one thing
changed, compiled by `serving.compile.compiler` and run by `serving.local.runtime.local_ray` in its
own process (Ray reads the fast-path variables when its processes start). The load generator
(`serving.local.bench.loadgen`: a process of its own at a raised priority, so the engine cannot
starve it) sends the same requests to each over loopback and measures what a client sees:
request throughput, output tokens/s, time to first token, time per output token, inter-token
latency per token and tokens per arrival. The simulated engine reports which replica served a
request and how many prompt tokens hit its prefix cache. The bench runs every configuration
several times, interleaved (`infra.cli.bench`; figures over repetitions:
`serving.local.bench.repeats`).

The engine's own metrics, scraped from the run's Ray before and after the load, give what the
dashboard and `servestack top` show for the same requests (`serving.observability.top`'s
arithmetic): prefix-cache hit rate, time queued for a batch, TTFT percentiles as Prometheus
interpolates them. The report's hit rate is the engine's wherever it exports metrics.

Numbers are from a simulated engine on a CPU: they measure Ray Serve's side of serving (proxy,
routing, streaming) under the planner's engine timings, not a GPU.
"""

from __future__ import annotations

import contextlib
import functools
import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from pydantic import Field

from serving.frozen import Frozen
from serving.local.bench import loadgen
from serving.local.bench.metrics import figures_after, metrics_urls, settled
from serving.local.bench.stats import RequestResult, WorkloadReport, summarize
from serving.local.bench.workloads import (
    ADAPTER_WORKLOAD,
    SHARED_PREFIX_WORKLOADS,
    WORKLOADS,
    Workload,
    WorkloadName,
    adapter_names,
    build_requests,
)
from serving.local.engine.simulation import SimulationSettings
from serving.local.runtime import cleanup
from serving.local.runtime.app import Engine
from serving.local.runtime.local_ray import ACCEPT_FLAG, READY_PREFIX
from serving.local.runtime.progress import QUIET, STATE_PREFIX, RunProgress
from serving.plan.rules.lora_routing import RULE as LORA_ROUTING
from serving.spec.parts import Autoscaling, FastPaths, Router, RouterKind
from serving.spec.profile import ModelSpec

T = TypeVar("T")


class Variant(Frozen):
    """One configuration: the profile with its fast paths and router set as named."""

    name: str
    fast_paths: bool
    router: RouterKind
    workloads: tuple[WorkloadName, ...]
    replicas: int | None = Field(
        default=None, ge=1, description="Replicas of this variant; None: the bench's number."
    )
    bare_vllm: bool = Field(
        default=False, description="A bare vLLM server with the same engine arguments, no Ray."
    )
    accepts: tuple[str, ...] = Field(
        default=(),
        description="Error verdicts (their codes) this configuration is run despite: a "
        "baseline the bench measures what the verdict prevents against, never a deploy.",
    )


def default_variants(spec: ModelSpec) -> list[Variant]:
    """Fast paths on against off (power of two on both, so only the data path differs); Ray's
    prefix affinity and servestack's (serving.router.prefix_affinity) against power of two, fast
    paths on. A profile with LoRA adapters: servestack's adapter-aware router against power of
    two on its adapters (`adapter_variants`)."""
    if spec.lora is not None:
        return adapter_variants()
    return [
        Variant(
            name="fast-paths-on/power-of-two",
            fast_paths=True,
            router="power_of_two",
            workloads=WORKLOADS,
        ),
        Variant(
            name="fast-paths-off/power-of-two",
            fast_paths=False,
            router="power_of_two",
            workloads=("decode-heavy", "prefill-heavy"),
        ),
        Variant(
            name="fast-paths-on/prefix-affinity",
            fast_paths=True,
            router="prefix_affinity",
            workloads=SHARED_PREFIX_WORKLOADS,
        ),
        Variant(
            name="fast-paths-on/servestack-prefix-affinity",
            fast_paths=True,
            router="servestack_prefix_affinity",
            workloads=SHARED_PREFIX_WORKLOADS,
        ),
    ]


def adapter_variants() -> list[Variant]:
    """servestack's router, which sends an adapter's requests to a replica that holds it, against
    power of two, which is how Ray 2.56.1 routes them behind direct streaming (blind to the
    adapter: the `lora-routing` verdict that refuses such a profile, accepted for this baseline
    only)."""
    return [
        Variant(
            name="fast-paths-on/servestack-prefix-affinity",
            fast_paths=True,
            router="servestack_prefix_affinity",
            workloads=(ADAPTER_WORKLOAD,),
        ),
        Variant(
            name="fast-paths-on/power-of-two",
            fast_paths=True,
            router="power_of_two",
            workloads=(ADAPTER_WORKLOAD,),
            accepts=(LORA_ROUTING.code,),
        ),
    ]


def adapter_bench_spec(spec: ModelSpec, count: int) -> ModelSpec:
    """The profile serving the adapter workload's `count` adapters (`adapter_names`) in place of
    its own: each at the rank of its first, from the same folder; the profile's slots per
    replica (max_loras, max_cpu_loras, max_lora_rank) as they are."""
    if spec.lora is None:
        raise ValueError(f"{spec.name} serves no LoRA adapters")
    first = spec.lora.adapters[0]
    folder = first.source.rstrip("/").rsplit("/", 1)[0]
    adapters = [
        {"name": name, "source": f"{folder}/{name}", "rank": first.rank}
        for name in adapter_names(count)
    ]
    lora = spec.lora.model_dump() | {"adapters": adapters}
    return ModelSpec.model_validate(spec.model_dump() | {"lora": lora})


def variant_spec(spec: ModelSpec, variant: Variant, replicas: int) -> ModelSpec:
    """The profile with the variant's fast paths and router, at a fixed number of replicas (an
    autoscaler on a benchmark would change two things at once)."""
    fast = spec.fast_paths if variant.fast_paths else FastPaths(
        haproxy=False, direct_streaming=False, throughput_optimized=False, ray_v2_executor=False
    )  # fmt: skip
    router = spec.router if variant.router == spec.router.kind else Router(kind=variant.router)
    autoscaling = Autoscaling(
        min_replicas=replicas,
        max_replicas=replicas,
        target_ongoing_requests=spec.autoscaling.target_ongoing_requests,
    )
    data = spec.model_dump() | {
        "fast_paths": fast.model_dump(),
        "router": router.model_dump(),
        "autoscaling": autoscaling.model_dump(),
    }
    return ModelSpec.model_validate(data)


# --- requests -------------------------------------------------------------------------------


class Load(NamedTuple):
    """One load's results, its wall time, and how its load generator was kept from starving."""

    results: list[RequestResult]
    duration_s: float
    isolation: str


def run_load(
    endpoint: str,
    requests: Sequence[dict[str, Any]],
    concurrency: int,
    on_done: Callable[[], None] | None = None,
    timeout_s: float = 600.0,
) -> Load:
    """Send the requests with at most `concurrency` in flight, from the load generator's own
    process (`serving.local.bench.loadgen`)."""
    run = loadgen.generate_load(endpoint, requests, concurrency, on_done, timeout_s)
    results = [RequestResult.model_validate(raw) for raw in run.results]
    return Load(sorted(results, key=lambda r: r.index or 0), run.duration_s, run.isolation)


# --- one configuration in its own process --------------------------------------------------


@contextlib.contextmanager
def running_variant(
    spec: ModelSpec,
    settings: SimulationSettings | None,
    log_path: Path,
    ready_timeout_s: float = 600.0,
    engine: Engine = "simulated",
    on_state: Callable[[str], None] | None = None,
    on_stopped: Callable[[int, list[int]], None] | None = None,
    accepts: Sequence[str] = (),
) -> Iterator[str]:
    """Start `python -m serving.local.runtime.local_ray` for the spec; yield its endpoint; stop it.
    Its output (Ray's and Serve's logs) goes to `log_path`; `on_state` hears the steps it
    reports while it starts and stops; `on_stopped` hears how the runtime exited (its exit
    code) and which processes of its run were still left after it, ended here. `accepts`: the
    error verdicts a comparison baseline runs despite (`Variant.accepts`)."""
    command = [
        sys.executable,
        "-m",
        "serving.local.runtime.local_ray",
        json.dumps(spec.model_dump(mode="json")),
        "null" if settings is None else settings.model_dump_json(),
        engine,
        *(f"{ACCEPT_FLAG}{code}" for code in accepts),
    ]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("w") as log:
        # The runtime ends what its run started; its supervision (the run's mark, which the
        # runtime's run keeps, and a session of its own) is for what it cannot end: whatever is
        # left should it be killed or its clean-up overrun.
        child: cleanup.Supervised | None = None
        reader: _Reader | None = None
        try:
            with cleanup.supervised(
                command, stdout=subprocess.PIPE, stderr=log, text=True
            ) as child:
                reader = _Reader(child.process, on_state)
                yield reader.await_ready(ready_timeout_s, log_path)
        finally:
            if reader is not None:
                reader.join()
            if child is not None:
                if child.ended:
                    print(f"ended {len(child.ended)} processes the local run left behind", file=log)
                if on_stopped is not None:
                    on_stopped(child.process.returncode, child.ended)


class VariantStartError(RuntimeError):
    """A configuration's local application did not come up."""


class _Reader:
    """Reads a runtime's stdout to its end: its ready line (the endpoint) and its states."""

    def __init__(
        self, process: subprocess.Popen[str], on_state: Callable[[str], None] | None
    ) -> None:
        self.process = process
        self.on_state = on_state
        self.endpoint: str | None = None
        self.done = threading.Event()  # the ready line came, or the output ended
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith(READY_PREFIX):
                self.endpoint = line[len(READY_PREFIX) :].strip()
                self.done.set()
            elif line.startswith(STATE_PREFIX) and self.on_state is not None:
                self.on_state(line[len(STATE_PREFIX) :].strip())
        self.done.set()

    def await_ready(self, timeout_s: float, log_path: Path) -> str:
        self.done.wait(timeout_s)
        if self.endpoint is not None:
            return self.endpoint
        tail = log_path.read_text(errors="replace").strip().splitlines()[-5:]
        ended = self.process.poll() is not None
        state = "exited" if ended else f"not ready after {timeout_s:.0f} s"
        raise VariantStartError(f"the local application {state}; {log_path}: " + " | ".join(tail))

    def join(self) -> None:
        """After the process ended: its last states are told before the caller goes on."""
        self.thread.join(5.0)


# --- the run --------------------------------------------------------------------------------


WARMUP_REQUESTS = 4


def run_variant(
    spec: ModelSpec,
    variant: Variant,
    workloads: dict[WorkloadName, Workload],
    settings: SimulationSettings | None,
    replicas: int,
    log_dir: Path,
    progress: RunProgress = QUIET,
    engine: Engine = "simulated",
    repetition: int = 0,
) -> list[WorkloadReport]:
    """Run the variant's workloads, each on a freshly started application: no workload inherits
    another's prefix caches or the router's memory of where prompts went. Each start's first
    requests (`WARMUP_REQUESTS`) warm it up and are not counted. `progress` hears each step;
    the reports carry `repetition`."""
    reports = []
    replicas = variant.replicas or replicas
    for name in variant.workloads:
        if name not in workloads:
            continue
        log_path = log_dir / f"{variant.name.replace('/', '_')}-{name}-{repetition}.log"
        one = functools.partial(
            _workload, spec, variant, name, workloads[name], settings, replicas, log_path,
            progress, engine,
        )  # fmt: skip
        report = retried_start(one, progress)
        reports.append(report.model_copy(update={"repetition": repetition}))
    return reports


# A local Ray that does not come up on a machine other work holds (its metrics agent silent
# for 30 s under a load average of 14, seen here) is started once more before the run fails.
START_ATTEMPTS = 2


def retried_start(run: Callable[[], T], progress: RunProgress = QUIET) -> T:
    """`run`, once more if its application did not start: nothing was measured yet."""
    for attempt in range(1, START_ATTEMPTS + 1):
        try:
            return run()
        except VariantStartError:
            if attempt == START_ATTEMPTS:
                raise
            progress.retrying()
    raise AssertionError("unreachable")


def _workload(
    spec: ModelSpec,
    variant: Variant,
    name: WorkloadName,
    workload: Workload,
    settings: SimulationSettings | None,
    replicas: int,
    log_path: Path,
    progress: RunProgress,
    engine: Engine,
) -> WorkloadReport:
    """One workload on a freshly started application, warmed up first."""
    compiled = variant_spec(spec, variant, replicas)
    if variant.bare_vllm:
        from serving.local.bench.real_engine import running_bare_vllm

        progress.configuration(variant.name, name, workload.requests, "a bare vLLM server")
        starting = running_bare_vllm(compiled, log_path)
    else:
        progress.configuration(variant.name, name, workload.requests, "a local Ray")
        starting = running_variant(
            compiled, settings, log_path, engine=engine, on_state=progress.state,
            accepts=variant.accepts,
        )  # fmt: skip
    with starting as endpoint:
        progress.state("answering; warming up")
        warmup = Workload(
            name="decode-heavy", input_tokens=8, output_tokens=4,
            requests=WARMUP_REQUESTS, concurrency=WARMUP_REQUESTS,
        )  # fmt: skip
        warmed = run_load(endpoint, build_requests(warmup, spec.name, seed=0), WARMUP_REQUESTS)
        # The engine's counters once the warm-up shows in them: the load's figures are what
        # changes from here.
        urls = metrics_urls(endpoint)
        before = settled(urls, spec.name, sum(r.ok for r in warmed.results)) if urls else None
        progress.ready()
        load = run_load(
            endpoint, build_requests(workload, spec.name), workload.concurrency,
            progress.request_done,
        )  # fmt: skip
        # A bare vLLM server has no Ray metrics: no figures, and nothing missing.
        figures = (
            figures_after(urls, spec.name, before, sum(r.ok for r in load.results))
            if before is not None else None
        )  # fmt: skip
        progress.stopping()
    progress.stopped()
    engine_figures = None if isinstance(figures, str) else figures
    report = summarize(variant.name, name, load.results, load.duration_s, replicas, engine_figures)
    missing = figures if isinstance(figures, str) else None
    return report.model_copy(
        update={"load_generator": load.isolation, "engine_metrics_missing": missing}
    )
