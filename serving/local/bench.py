"""The local benchmark: one model's application under several configurations, side by side.

Each configuration (fast paths on or off, a router) is the profile's spec with that one thing
changed, compiled by `serving.compiler` and run by `serving.local.runtime` in its own process
(Ray reads the fast-path variables when its processes start). A bounded asyncio load generator
sends the same requests to each over loopback and measures what a client sees: request
throughput, output tokens/s, time to first token, inter-token latency. The simulated engine
reports which replica served a request and how many prompt tokens hit its prefix cache.

The engine's own metrics, scraped from the run's Ray before and after the load, give what the
dashboard and `servestack top` show for the same requests (`serving.top`'s arithmetic):
prefix-cache hit rate, time queued for a batch, TTFT percentiles as Prometheus interpolates
them. The report's hit rate is the engine's wherever it exports metrics.

Numbers are from a simulated engine on a CPU: they measure Ray Serve's side of serving (proxy,
routing, streaming) under the planner's engine timings, not a GPU.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import httpx
from pydantic import Field

from serving.cache_report import REPLICA_HEADER
from serving.frozen import Frozen
from serving.local import cleanup
from serving.local.app import Engine
from serving.local.bench_metrics import EngineFigures, figures_after, metrics_urls, settled
from serving.local.progress import QUIET, STATE_PREFIX, RunProgress
from serving.local.runtime import READY_PREFIX
from serving.local.simulation import SimulationSettings
from serving.spec import ModelSpec
from serving.spec_parts import Autoscaling, FastPaths, Router, RouterKind

WorkloadName = Literal["decode-heavy", "prefill-heavy", "multi-prompt", "hot-prompt"]
WORKLOADS: tuple[WorkloadName, ...] = (
    "decode-heavy",
    "prefill-heavy",
    "multi-prompt",
    "hot-prompt",
)
# The workloads of many system prompts, on which routers are compared.
SHARED_PREFIX_WORKLOADS: tuple[WorkloadName, ...] = ("multi-prompt", "hot-prompt")
# The hot prompt's share of the hot-prompt workload: with 4 replicas, twice what one replica
# should take, so a router that keeps it on its owner overloads that replica.
HOT_SHARE = 0.5


class Workload(Frozen):
    """A set of requests: unique prompts, or a few long shared prefixes and a unique question."""

    name: WorkloadName
    input_tokens: int = Field(ge=1, description="Prompt words per request (prefix included).")
    output_tokens: int = Field(ge=1)
    requests: int = Field(ge=1)
    concurrency: int = Field(ge=1, description="Requests in flight at most.")
    shared_prefixes: int = Field(default=0, ge=0, description="Distinct system prompts.")
    prefix_tokens: int = Field(default=0, ge=0, description="Words per system prompt.")
    hot_share: float = Field(
        default=0.0, ge=0, lt=1,
        description="Share of requests on the first system prompt; the rest share the others.",
    )  # fmt: skip


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


class RequestResult(Frozen):
    ok: bool
    error: str | None = None
    start_s: float
    end_s: float
    ttft_s: float | None = None
    token_gaps_s: list[float] = Field(default_factory=list)
    output_tokens: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    replica: str | None = None


class Percentiles(Frozen):
    p50: float | None
    p90: float | None
    p99: float | None


class WorkloadReport(Frozen):
    variant: str
    workload: WorkloadName
    requests: int
    failed: int
    duration_s: float
    requests_per_s: float
    output_tokens_per_s: float
    ttft_s: Percentiles
    itl_s: Percentiles
    cache_hit_rate: float = Field(
        description="Prefix-cache hit rate: the engine's metrics' where there are some, else "
        "cached prompt tokens / prompt tokens as the responses' usage reports them."
    )
    client_cache_hit_rate: float = Field(description="Cached / prompt tokens, from usage.")
    engine_metrics: EngineFigures | None = None
    requests_per_replica: dict[str, int]
    busiest_over_idlest: float | None = Field(
        description="Requests on the busiest replica over those on the idlest; None when some "
        "replica got none."
    )
    errors: list[str] = Field(default_factory=list, description="First few distinct errors.")


def default_variants(spec: ModelSpec) -> list[Variant]:
    """Fast paths on against off (power of two on both, so only the data path differs); Ray's
    prefix affinity and servestack's (serving.routing) against power of two, fast paths on."""
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


def _words(rng: random.Random, count: int) -> str:
    return " ".join(f"t{rng.randrange(1_000_000)}" for _ in range(count))


def prefix_order(workload: Workload, rng: random.Random) -> list[int]:
    """Which system prompt each request takes, shuffled: the hot one for `hot_share` of the
    requests, the others in a round robin for the rest (all of them when nothing is hot)."""
    if not workload.shared_prefixes:
        return []
    hot = round(workload.hot_share * workload.requests)
    others = list(range(1 if hot else 0, workload.shared_prefixes)) or [0]
    order = [0] * hot + [others[i % len(others)] for i in range(workload.requests - hot)]
    rng.shuffle(order)
    return order


def build_requests(workload: Workload, model: str, seed: int = 7) -> list[dict[str, Any]]:
    """The same chat requests for every configuration (seeded), each with a unique question
    after its system prompt (if the workload has them)."""
    rng = random.Random(f"{seed}-{workload.name}")
    prefixes = [_words(rng, workload.prefix_tokens) for _ in range(workload.shared_prefixes)]
    order = prefix_order(workload, rng)
    requests = []
    for index in range(workload.requests):
        messages = []
        question_tokens = workload.input_tokens
        if prefixes:
            messages.append({"role": "system", "content": prefixes[order[index]]})
            question_tokens = max(1, workload.input_tokens - workload.prefix_tokens)
        messages.append({"role": "user", "content": _words(rng, question_tokens)})
        requests.append(
            {
                "model": model,
                "messages": messages,
                "max_tokens": workload.output_tokens,
                # vLLM's extension: every configuration generates exactly max_tokens, whatever
                # the tiny model's random weights would have ended on.
                "ignore_eos": True,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
        )
    return requests


async def _one(client: httpx.AsyncClient, endpoint: str, body: dict[str, Any]) -> RequestResult:
    start = time.perf_counter()
    ttft, last, gaps, tokens = None, start, [], 0
    usage: dict[str, Any] = {}
    replica = None
    try:
        async with client.stream("POST", f"{endpoint}/v1/chat/completions", json=body) as response:
            if response.status_code != 200:
                text = (await response.aread()).decode(errors="replace")[:300]
                return RequestResult(
                    ok=False, error=f"HTTP {response.status_code}: {text}",
                    start_s=start, end_s=time.perf_counter(),
                )  # fmt: skip
            # servestack's reporting server names its replica (vLLM's fingerprint does not)
            named = response.headers.get(REPLICA_HEADER)
            async for line in response.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                replica = named or chunk.get("system_fingerprint") or replica
                if chunk.get("usage"):
                    usage = chunk["usage"]
                for choice in chunk.get("choices", []):
                    if choice.get("delta", {}).get("content"):
                        now = time.perf_counter()
                        if ttft is None:
                            ttft = now - start
                        else:
                            gaps.append(now - last)
                        last, tokens = now, tokens + 1
    except (httpx.HTTPError, ValueError) as exc:
        return RequestResult(
            ok=False, error=f"{type(exc).__name__}: {exc}", start_s=start, end_s=time.perf_counter()
        )
    details = usage.get("prompt_tokens_details") or {}
    return RequestResult(
        ok=True,
        start_s=start,
        end_s=time.perf_counter(),
        ttft_s=ttft,
        token_gaps_s=gaps,
        output_tokens=tokens,
        prompt_tokens=int(usage.get("prompt_tokens", 0)),
        cached_tokens=int(details.get("cached_tokens") or 0),
        replica=replica,
    )


async def run_load(
    endpoint: str,
    requests: Sequence[dict[str, Any]],
    concurrency: int,
    on_done: Callable[[], None] | None = None,
    timeout_s: float = 600.0,
) -> tuple[list[RequestResult], float]:
    """Send the requests with at most `concurrency` in flight; returns results and wall time."""
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    for body in requests:
        queue.put_nowait(body)
    results: list[RequestResult] = []
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=timeout_s, limits=limits) as client:

        async def worker() -> None:
            while True:
                try:
                    body = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                results.append(await _one(client, endpoint, body))
                if on_done is not None:
                    on_done()

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return results, time.perf_counter() - start


def _percentiles(values: Sequence[float]) -> Percentiles:
    if not values:
        return Percentiles(p50=None, p90=None, p99=None)
    ordered = sorted(values)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return Percentiles(p50=at(0.5), p90=at(0.9), p99=at(0.99))


def summarize(
    variant: str,
    workload: WorkloadName,
    results: Sequence[RequestResult],
    duration_s: float,
    replicas: int,
    engine_metrics: EngineFigures | None = None,
) -> WorkloadReport:
    done = [r for r in results if r.ok]
    prompt = sum(r.prompt_tokens for r in done)
    per_replica = Counter(r.replica or "?" for r in done)
    counts = sorted(per_replica.values())
    spread = counts[-1] / counts[0] if counts and len(counts) >= replicas else None
    client_hit_rate = sum(r.cached_tokens for r in done) / prompt if prompt else 0.0
    return WorkloadReport(
        variant=variant,
        workload=workload,
        requests=len(results),
        failed=len(results) - len(done),
        duration_s=duration_s,
        requests_per_s=len(done) / duration_s if duration_s > 0 else 0.0,
        output_tokens_per_s=sum(r.output_tokens for r in done) / duration_s if duration_s else 0.0,
        ttft_s=_percentiles([r.ttft_s for r in done if r.ttft_s is not None]),
        itl_s=_percentiles([gap for r in done for gap in r.token_gaps_s]),
        cache_hit_rate=(
            engine_metrics.prefix_hit_rate
            if engine_metrics is not None and engine_metrics.prefix_hit_rate is not None
            else client_hit_rate
        ),
        client_cache_hit_rate=client_hit_rate,
        engine_metrics=engine_metrics,
        requests_per_replica=dict(per_replica.most_common()),
        busiest_over_idlest=spread,
        errors=sorted({r.error for r in results if r.error})[:3],
    )


# --- one configuration in its own process --------------------------------------------------


@contextlib.contextmanager
def running_variant(
    spec: ModelSpec,
    settings: SimulationSettings | None,
    log_path: Path,
    ready_timeout_s: float = 600.0,
    engine: Engine = "simulated",
    on_state: Callable[[str], None] | None = None,
) -> Iterator[str]:
    """Start `python -m serving.local.runtime` for the spec; yield its endpoint; stop it.
    Its output (Ray's and Serve's logs) goes to `log_path`; `on_state` hears the steps it
    reports while it starts and stops."""
    command = [
        sys.executable,
        "-m",
        "serving.local.runtime",
        json.dumps(spec.model_dump(mode="json")),
        "null" if settings is None else settings.model_dump_json(),
        engine,
    ]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("w") as log:
        # Its own session: should a clean stop hang, its whole process group (the local Ray's
        # processes and HAProxy) can be ended by id without touching anything else.
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True
        )
        reader = _Reader(process, on_state)
        try:
            yield reader.await_ready(ready_timeout_s, log_path)
        finally:
            cleanup.stop(process)
            reader.join()


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


# --- the report -----------------------------------------------------------------------------


def ratios(reports: Sequence[WorkloadReport]) -> dict[str, float]:
    """The headline comparisons, where both sides were measured."""
    by = {(r.variant, r.workload): r for r in reports}
    found: dict[str, float] = {}

    def ratio(key: str, a: tuple[str, str], b: tuple[str, str], field: str) -> None:
        if a in by and b in by and getattr(by[b], field):
            found[key] = getattr(by[a], field) / getattr(by[b], field)

    on, off = "fast-paths-on/power-of-two", "fast-paths-off/power-of-two"
    for workload in ("decode-heavy", "prefill-heavy"):
        ratio(f"{workload}: fast paths on/off, requests/s", (on, workload), (off, workload),
              "requests_per_s")  # fmt: skip
    routers = {
        "Ray prefix affinity": "fast-paths-on/prefix-affinity",
        "servestack prefix affinity": "fast-paths-on/servestack-prefix-affinity",
    }
    for workload in SHARED_PREFIX_WORKLOADS:
        for label, variant in routers.items():
            ratio(f"{workload}: {label}/power of two, requests/s",
                  (variant, workload), (on, workload), "requests_per_s")  # fmt: skip
        for label, variant in {"power of two": on, **routers}.items():
            if (variant, workload) in by:
                found[f"{workload}: {label} cache hit rate"] = by[
                    (variant, workload)
                ].cache_hit_rate
    return found


# --- the run --------------------------------------------------------------------------------


def default_workloads(
    requests: int = 24,
    concurrency: int = 12,
    shared_prefixes: int = 4,
    prefix_tokens: int = 2000,
    hot_share: float = HOT_SHARE,
) -> dict[WorkloadName, Workload]:
    """The workloads at sizes that finish in minutes on two cores. The two with shared system
    prompts send twice the requests: routing shows once each prompt has been asked a few
    times."""
    return {
        "decode-heavy": Workload(
            name="decode-heavy", input_tokens=50, output_tokens=500,
            requests=requests, concurrency=concurrency,
        ),
        "prefill-heavy": Workload(
            name="prefill-heavy", input_tokens=8000, output_tokens=50,
            requests=requests, concurrency=concurrency,
        ),
        "multi-prompt": Workload(
            name="multi-prompt", input_tokens=prefix_tokens + 50, output_tokens=50,
            requests=requests * 2, concurrency=concurrency,
            shared_prefixes=shared_prefixes, prefix_tokens=prefix_tokens,
        ),
        "hot-prompt": Workload(
            name="hot-prompt", input_tokens=prefix_tokens + 50, output_tokens=50,
            requests=requests * 2, concurrency=concurrency,
            shared_prefixes=shared_prefixes, prefix_tokens=prefix_tokens, hot_share=hot_share,
        ),
    }  # fmt: skip


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
) -> list[WorkloadReport]:
    """Run the variant's workloads, each on a freshly started application: no workload inherits
    another's prefix caches or the router's memory of where prompts went. `progress` hears
    each step."""
    reports = []
    replicas = variant.replicas or replicas
    for name in variant.workloads:
        if name not in workloads:
            continue
        workload = workloads[name]
        log_path = log_dir / f"{variant.name.replace('/', '_')}-{name}.log"
        compiled = variant_spec(spec, variant, replicas)
        if variant.bare_vllm:
            from serving.local.vllm_bench import running_bare_vllm

            progress.configuration(variant.name, name, workload.requests, "a bare vLLM server")
            starting = running_bare_vllm(compiled, log_path)
        else:
            progress.configuration(variant.name, name, workload.requests, "a local Ray")
            starting = running_variant(
                compiled, settings, log_path, engine=engine, on_state=progress.state
            )
        with starting as endpoint:
            progress.state("answering; warming up")
            warmup = Workload(
                name="decode-heavy", input_tokens=8, output_tokens=4,
                requests=WARMUP_REQUESTS, concurrency=WARMUP_REQUESTS,
            )  # fmt: skip
            warmed, _ = asyncio.run(
                run_load(endpoint, build_requests(warmup, spec.name, seed=0), WARMUP_REQUESTS)
            )
            # The engine's counters once the warm-up shows in them: the load's figures are
            # what changes from here.
            urls = metrics_urls(endpoint)
            before = settled(urls, spec.name, sum(r.ok for r in warmed)) if urls else None
            progress.ready()
            results, duration = asyncio.run(
                run_load(
                    endpoint,
                    build_requests(workload, spec.name),
                    workload.concurrency,
                    progress.request_done,
                )
            )
            figures = figures_after(urls, spec.name, before, sum(r.ok for r in results))
            progress.stopping()
        progress.stopped()
        reports.append(summarize(variant.name, name, results, duration, replicas, figures))
    return reports
