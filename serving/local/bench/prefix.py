"""The routers side by side with the real engine: the precise router (engine-reported caches),
servestack's sent-history router and power of two, on the same shared-prompt requests, with
prefix caches that hold fewer system prompts than the workload has.

- The cache size: vLLM's CPU build sizes its KV cache in GiB (VLLM_CPU_KVCACHE_SPACE), far more
  than any local workload needs; `num_gpu_blocks_override` (an engine argument vLLM honours on
  every platform, vllm/v1/core/kv_cache_utils.py) caps it at a number of prompts' blocks,
  counted with the tiny model's own tokenizer.
- Ideal placement: every request hits its system prompt's blocks except the first request of
  each prompt. The hit rate that gives (cached prompt tokens over prompt tokens, as vLLM's usage
  counts them) is what the routers' measured hit rates are held against.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from serving.local.bench.runner import (
    WARMUP_REQUESTS,
    Variant,
    run_load,
    running_variant,
    variant_spec,
)
from serving.local.bench.stats import Pair, RequestResult, WorkloadReport, summarize
from serving.local.bench.workloads import (
    SHARED_PREFIX_WORKLOADS,
    Workload,
    WorkloadName,
    build_requests,
)
from serving.local.runtime.progress import QUIET, RunProgress
from serving.spec.profile import ModelSpec

PRECISE = "fast-paths-on/servestack-precise-prefix"
# vLLM's KV-cache block on its CPU build, in tokens: the compiled profiles set none, and the CPU
# platform then takes 128 (vllm/platforms/cpu.py, check_and_update_config).
BLOCK_TOKENS = 128


def precise_variant() -> Variant:
    return Variant(
        name=PRECISE,
        fast_paths=True,
        router="servestack_precise_prefix",
        workloads=SHARED_PREFIX_WORKLOADS,
    )


def chat_tokens(model_dir: str) -> Callable[[dict[str, Any]], list[int]]:
    """The tiny model's tokens for a chat request, as vLLM renders its template."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)  # type: ignore[no-untyped-call]

    def tokens(body: dict[str, Any]) -> list[int]:
        return list(
            tokenizer.apply_chat_template(
                body["messages"], tokenize=True, add_generation_prompt=True
            )
        )

    return tokens


def cache_blocks(
    workload: Workload,
    model: str,
    tokens: Callable[[dict[str, Any]], list[int]],
    prompts: float,
    block_tokens: int = BLOCK_TOKENS,
) -> int:
    """KV blocks for `prompts` of the workload's prompts (prefix and question)."""
    longest = max(len(tokens(body)) for body in build_requests(workload, model)[:8])
    return int(prompts * longest) // block_tokens + 1


class IdealRequest(NamedTuple):
    """One request under ideal placement."""

    prompt_tokens: int
    cached_tokens: int  # what ideal placement serves from the cache
    system: str  # its system prompt ("" without one): what it shares with other requests


def ideal_cached(
    workload: Workload,
    model: str,
    tokens: Callable[[dict[str, Any]], list[int]],
    block_tokens: int = BLOCK_TOKENS,
) -> list[IdealRequest]:
    """Each request under ideal placement, in order: each system prompt misses once, then every
    request carrying it hits its whole blocks."""
    seen: dict[str, list[int]] = {}
    found = []
    for body in build_requests(workload, model):
        ids = tokens(body)
        system = body["messages"][0]["content"] if len(body["messages"]) > 1 else ""
        first = seen.setdefault(system, ids)
        common = 0
        if first is not ids:
            common = next(
                (i for i, (a, b) in enumerate(zip(first, ids, strict=False)) if a != b),
                min(len(first), len(ids)),
            )
        found.append(IdealRequest(len(ids), common // block_tokens * block_tokens, system))
    return found


def ideal_hit_rate(
    workload: Workload,
    model: str,
    tokens: Callable[[dict[str, Any]], list[int]],
    block_tokens: int = BLOCK_TOKENS,
) -> float:
    """Cached over prompt tokens if each system prompt missed once and hit ever after."""
    found = ideal_cached(workload, model, tokens, block_tokens)
    total = sum(r.prompt_tokens for r in found)
    return sum(r.cached_tokens for r in found) / total if total else 0.0


# Why a request served less from the cache than ideal placement would have.
NEW_HOME = "first on its replica"  # its prompt's first request there: the load bound's price
LOST = "lost by its replica"  # its replica had served the prompt: evicted, or never cached


def lost_hits(
    workload: Workload,
    model: str,
    tokens: Callable[[dict[str, Any]], list[int]],
    results: Sequence[RequestResult],
    block_tokens: int = BLOCK_TOKENS,
) -> dict[str, float]:
    """The share of the workload's prompt tokens that ideal placement serves from the cache and
    the run did not, by why (`NEW_HOME`, `LOST`), the requests taken in the order they started.
    Requests of one prompt that start together reach the engine in either order, so the one
    ideal placement calls first may hit while the next misses: what a prompt's requests hit
    beyond ideal is taken off its own shortfall (lost first). The classes then add up to the
    run's gap to ideal placement's hit rate."""
    ideal = ideal_cached(workload, model, tokens, block_tokens)
    total = sum(r.prompt_tokens for r in ideal)
    short: dict[str, dict[str, int]] = {}  # prompt -> why -> tokens
    beyond: dict[str, int] = {}  # prompt -> tokens hit beyond ideal
    homes: set[tuple[str, str | None]] = set()
    for result in sorted(results, key=lambda r: r.start_s):
        if not result.ok or result.index is None:
            continue
        prompt = ideal[result.index].system
        gap = ideal[result.index].cached_tokens - result.cached_tokens
        why = LOST if (prompt, result.replica) in homes else NEW_HOME
        homes.add((prompt, result.replica))
        mine = short.setdefault(prompt, dict.fromkeys((LOST, NEW_HOME), 0))
        if gap > 0:
            mine[why] += gap
        else:
            beyond[prompt] = beyond.get(prompt, 0) - gap
    lost = dict.fromkeys((NEW_HOME, LOST), 0)
    for prompt, mine in short.items():
        extra = beyond.get(prompt, 0)
        for why in (LOST, NEW_HOME):
            taken = min(extra, mine[why])
            lost[why] += mine[why] - taken
            extra -= taken
    return {why: tokens_lost / total for why, tokens_lost in lost.items()} if total else {}


def precise_pairs(power_two: str, sent_history: str) -> dict[str, Pair]:
    """The precise router against power of two and against the sent-history router."""
    return {
        f"{workload}: precise router/{label}, requests/s": Pair(
            (PRECISE, workload), (other, workload)
        )
        for workload in SHARED_PREFIX_WORKLOADS
        for label, other in (("power of two", power_two), ("sent-history router", sent_history))
    }


def router_figures(reports: Sequence[WorkloadReport]) -> dict[str, float]:
    """The precise router's hit rate and its busiest over idlest replica's requests."""
    by = {(r.variant, r.workload): r for r in reports}
    found: dict[str, float] = {}
    for workload in SHARED_PREFIX_WORKLOADS:
        precise = by.get((PRECISE, workload))
        if precise is None:
            continue
        found[f"{workload}: precise router cache hit rate (vLLM)"] = precise.cache_hit_rate
        if precise.busiest_over_idlest is not None:
            found[f"{workload}: precise router busiest/idlest replica"] = (
                precise.busiest_over_idlest
            )
    return found


class UncachedFit(NamedTuple):
    """A workload's run time as fixed + cost × uncached share of its prompt tokens, fitted
    (least squares) over the routers' runs of it on the same requests."""

    fixed_s: float
    all_uncached_s: float  # the cost: every prompt token prefilled

    def duration_s(self, hit_rate: float) -> float:
        return self.fixed_s + self.all_uncached_s * (1.0 - hit_rate)


def uncached_fit(reports: Sequence[WorkloadReport], workload: str) -> UncachedFit | None:
    """The fit over every router's run of the workload; None without two distinct hit rates."""
    points = [(1.0 - r.cache_hit_rate, r.duration_s) for r in reports if r.workload == workload]
    if len({x for x, _ in points}) < 2:
        return None
    slope, intercept = statistics.linear_regression([x for x, _ in points], [y for _, y in points])
    return UncachedFit(fixed_s=intercept, all_uncached_s=slope)


class IdealBound(NamedTuple):
    """What ideal placement would give on one run's figures: the workload's fit, power of two's
    run of it, and the second's time over the fit's at ideal placement's hit rate."""

    fit: UncachedFit
    power_two: WorkloadReport
    ratio: float


def ideal_bound(
    reports: Sequence[WorkloadReport], workload: str, rate: float, power_two: str
) -> IdealBound | None:
    """The bound of any router here on `workload` (None without a fit or a power-of-two run)."""
    fit = uncached_fit(reports, workload)
    base = next((r for r in reports if (r.variant, r.workload) == (power_two, workload)), None)
    if fit is None or base is None or fit.duration_s(rate) <= 0:
        return None
    return IdealBound(fit, base, base.duration_s / fit.duration_s(rate))


def ideal_ratios(
    reports: Sequence[WorkloadReport], ideal: Mapping[str, float], power_two: str
) -> dict[str, float]:
    """Ideal placement's hit rate per workload, the precise router's hit rate over it, and what
    ideal placement would give over power of two by the fit (the bound of any router here)."""
    by: dict[tuple[str, str], WorkloadReport] = {(r.variant, r.workload): r for r in reports}
    found: dict[str, float] = {}
    for workload, rate in ideal.items():
        found[f"{workload}: ideal placement cache hit rate"] = rate
        precise = by.get((PRECISE, workload))
        if precise is not None and rate:
            found[f"{workload}: precise router hit rate/ideal"] = precise.cache_hit_rate / rate
        for why, share in ((precise.lost_hits or {}) if precise is not None else {}).items():
            found[f"{workload}: precise router hit rate short of ideal, {why}"] = share
        bound = ideal_bound(reports, workload, rate, power_two)
        if bound is not None:
            found[f"{workload}: ideal placement/power of two, requests/s (fitted)"] = bound.ratio
    return found


def run_routers(
    spec: ModelSpec,
    variant: Variant,
    workloads: Mapping[WorkloadName, Workload],
    replicas: int,
    log_dir: Path,
    progress: RunProgress = QUIET,
    tokens: Callable[[dict[str, Any]], list[int]] | None = None,
    repetition: int = 0,
) -> list[WorkloadReport]:
    """The variant's shared-prompt workloads one after the other on one start of the real
    engine (each start takes minutes on two cores). Every router meets the same sequence, the
    second workload on caches full of the first one's prompts, which it has to evict. With the
    engine's `tokens`, the precise router's reports say why it missed ideal placement's hits
    (the other routers' replicas are not named, so where a prompt lived is not known)."""
    replicas = variant.replicas or replicas
    log_path = log_dir / f"{variant.name.replace('/', '_')}-{repetition}.log"
    reports = []
    requests = sum(workloads[name].requests for name in variant.workloads)
    both = " then ".join(variant.workloads)
    progress.configuration(variant.name, both, requests, "a local Ray")
    compiled = variant_spec(spec, variant, replicas)
    with running_variant(
        compiled, None, log_path, engine="vllm", on_state=progress.state
    ) as endpoint:
        progress.state("answering; warming up")
        warmup = Workload(
            name="decode-heavy", input_tokens=8, output_tokens=4,
            requests=WARMUP_REQUESTS, concurrency=WARMUP_REQUESTS,
        )  # fmt: skip
        run_load(endpoint, build_requests(warmup, spec.name, seed=0), WARMUP_REQUESTS)
        progress.ready()
        for name in variant.workloads:
            workload = workloads[name]
            results, duration, isolation = run_load(
                endpoint,
                build_requests(workload, spec.name),
                workload.concurrency,
                progress.request_done,
            )
            report = summarize(variant.name, name, results, duration, replicas).model_copy(
                update={"repetition": repetition, "load_generator": isolation}
            )
            if tokens is not None and variant.name == PRECISE:
                lost = lost_hits(workload, spec.name, tokens, results)
                report = report.model_copy(update={"lost_hits": lost})
            reports.append(report)
        progress.stopping()
    progress.stopped()
    return reports
