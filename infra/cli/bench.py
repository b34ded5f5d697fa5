"""`servestack bench --local`'s orchestration: which workloads and configurations run (each on its
own local Ray), the real engine's capped prefix caches, and the bench.json document with its
chart. The CLI checks the flags, calls `run` and prints."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from infra.cli import progress
from serving.errors import ServestackError, unknown_key_fix
from serving.local.bench import stats as bench_stats
from serving.local.bench.workloads import (
    DEFAULT_ADAPTERS,
    SHARED_PREFIX_WORKLOADS,
    chosen_workloads,
)
from serving.local.runtime.app import Engine
from serving.spec.profile import ModelSpec


@dataclass(frozen=True)
class BenchOptions:
    """The bench's flags, checked by the CLI."""

    engine: Engine
    requests: int
    concurrency: int
    replicas: int
    prefixes: int
    prefix_tokens: int
    cache_prompts: float
    hot_share: float
    time_scale: float
    workloads: tuple[str, ...] = ()  # empty: all
    variants: tuple[str, ...] = ()  # empty: all
    repeats: int = 3  # each configuration, interleaved: A B C A B C ...
    adapters: int = DEFAULT_ADAPTERS  # the adapter workload's, on a profile with LoRA adapters


class BenchStartError(Exception):
    """A configuration's application never came up; the message names it."""


@dataclass(frozen=True)
class BenchOutcome:
    document: dict[str, Any]
    reports: list[Any]
    ratios: dict[str, float]
    spreads: dict[str, Any]


def run(
    spec: ModelSpec, options: BenchOptions, out_dir: Path, *, shown_on: Console, quiet: bool,
    command: str,
) -> BenchOutcome:  # fmt: skip
    """Run every chosen configuration on the same requests; write bench.json and bench.png in
    `out_dir`. Unknown workload or configuration names fail before anything starts."""
    from serving.local.bench import chart
    from serving.local.bench import prefix as prefix_bench
    from serving.local.bench import real_engine as vllm_bench
    from serving.local.bench import runner as bench
    from serving.local.engine import simulation

    adapters = options.adapters if spec.lora is not None else 0
    if adapters and options.engine != "simulated":
        raise ServestackError(
            "command line", "--engine", f"{spec.name} serves LoRA adapters, which the bench "
            "compares routers on with the simulated engine only (it counts the adapters each "
            "replica loads)", "drop --engine, or benchmark a profile without a lora: section",
        )  # fmt: skip
    workloads = chosen_workloads(
        options.workloads, options.requests, options.concurrency, options.prefixes,
        options.prefix_tokens, options.hot_share, adapters,
    )  # fmt: skip
    if adapters:
        spec = bench.adapter_bench_spec(spec, adapters)
    settings = None
    if options.engine == "simulated":
        cache_tokens = int(options.cache_prompts * (options.prefix_tokens + 50))
        settings = simulation.settings_from_plan(
            spec, time_scale=options.time_scale, cache_tokens=cache_tokens
        )
    candidates = (
        bench.default_variants(spec)
        if options.engine == "simulated"
        else vllm_bench.vllm_variants()
    )
    named = [v.name for v in candidates]
    for name in options.variants:
        if name not in named:
            raise ServestackError(
                "command line", "--variant", f"no configuration '{name}'",
                unknown_key_fix(name, named, "configurations"),
            )  # fmt: skip
    variants = [
        v.model_copy(update={"workloads": tuple(w for w in v.workloads if w in workloads)})
        for v in candidates
        if not options.variants or v.name in options.variants
    ]
    variants = [v for v in variants if v.workloads]
    runs = sum(len(v.workloads) for v in variants) * options.repeats
    spec_of = {v.name: spec for v in variants}
    ideal: dict[str, float] = {}  # workload -> ideal placement's hit rate
    tokens = None  # the tiny model's chat tokens, where routers are compared on the real engine
    if options.engine == "vllm":
        spec_of, ideal, tokens = _vllm_router_caches(
            spec, variants, workloads, options.cache_prompts
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    reports: list[Any] = []
    load_before = machine_load()
    with progress.bench_progress(shown_on, runs, quiet=quiet) as shown:
        # Interleaved: a slow minute of a shared machine falls on every configuration, and
        # each repetition's ratios compare configurations run minutes apart.
        for repetition in range(options.repeats):
            for variant in variants:
                try:
                    if spec_of[variant.name] is not spec:  # the real engine's router runs
                        reports += prefix_bench.run_routers(
                            spec_of[variant.name], variant, workloads, options.replicas,
                            out_dir / "logs", progress=shown, tokens=tokens,
                            repetition=repetition,
                        )  # fmt: skip
                        continue
                    reports += bench.run_variant(
                        spec_of[variant.name], variant, workloads, settings, options.replicas,
                        out_dir / "logs", progress=shown, engine=options.engine,
                        repetition=repetition,
                    )  # fmt: skip
                except bench.VariantStartError as exc:
                    raise BenchStartError(f"{variant.name}: {exc}") from None
    spreads = bench_spreads(options.engine, reports, ideal)
    ratios = {name: figure.median for name, figure in spreads.items()}
    document = {
        "command": command,
        "repetitions": options.repeats,
        "machine": {
            "cpus": os.cpu_count(),
            "load_before": load_before,
            "load_after": machine_load(),
        },
        "load_generator": next((r.load_generator for r in reports if r.load_generator), None),
        "model": spec.name,
        "engine": options.engine,
        "replicas": options.replicas,
        "simulation": settings.model_dump() if settings is not None else None,
        "workloads": {name: w.model_dump() for name, w in workloads.items()},
        "variants": [v.model_dump() for v in variants],
        "ratios": ratios,
        "spreads": {name: figure.model_dump() for name, figure in spreads.items()},
        "ideal_hit_rates": ideal,
        "reports": [r.model_dump() for r in reports],
    }
    (out_dir / "bench.json").write_text(json.dumps(document, indent=2) + "\n")
    chart.write_chart(reports, out_dir / "bench.png", engine=options.engine)
    return BenchOutcome(document, reports, ratios, spreads)


def machine_load() -> list[float]:
    """The load average over 1, 5 and 15 minutes: what else the machine was running."""
    return [round(value, 2) for value in os.getloadavg()]


def bench_ratios(
    engine: str, reports: Sequence[bench_stats.WorkloadReport], ideal: Mapping[str, float]
) -> dict[str, float]:
    """The headline ratios the bench prints and writes, from its reports and the hit rate of
    ideal placement per workload (the real engine's capped caches only)."""
    from serving.local.bench import prefix as prefix_bench
    from serving.local.bench import real_engine as vllm_bench

    if engine == "simulated":
        return bench_stats.ratios(reports)
    return vllm_bench.vllm_ratios(reports) | prefix_bench.ideal_ratios(
        reports, ideal, vllm_bench.POWER_TWO
    )


def bench_pairs(engine: str) -> dict[str, Any]:
    """The ratios of two configurations' figures among the bench's headline figures."""
    from serving.local.bench import real_engine as vllm_bench

    return bench_stats.simulated_pairs() if engine == "simulated" else vllm_bench.vllm_pairs()


def bench_spreads(
    engine: str, reports: Sequence[bench_stats.WorkloadReport], ideal: Mapping[str, float]
) -> dict[str, Any]:
    """The headline figures over the run's repetitions: each a median with its min-max, a
    ratio of two configurations the median of the repetitions' own ratios, with whether their
    spreads are apart (`serving.local.bench.repeats`)."""
    from serving.local.bench import repeats

    return repeats.headline_spreads(
        reports, lambda group: bench_ratios(engine, group, ideal), bench_pairs(engine)
    )


def load_document(path: Path) -> tuple[dict[str, Any], list[bench_stats.WorkloadReport]]:
    """A bench.json as the bench wrote it, with its reports read back."""
    document = json.loads(path.read_text())
    reports = [bench_stats.WorkloadReport.model_validate(r) for r in document["reports"]]
    return document, reports


def _vllm_router_caches(
    spec: Any, variants: list[Any], workloads: Any, cache_prompts: float
) -> tuple[dict[str, Any], dict[str, float], Any]:
    """With the real engine, the variants that compare routers (shared-prompt workloads only)
    get prefix caches of `cache_prompts` prompts (`num_gpu_blocks_override`); the hit rate of
    ideal placement on each such workload, by workload name; and the tiny model's tokens."""
    from serving.local.bench import prefix as prefix_bench
    from serving.local.engine.tiny_models import tiny_model
    from serving.local.runtime.app import tiny_family

    shared = [workloads[w] for w in SHARED_PREFIX_WORKLOADS if w in workloads]
    spec_of = {v.name: spec for v in variants}
    if not shared or not cache_prompts:
        return spec_of, {}, None
    tokens = prefix_bench.chat_tokens(str(tiny_model(tiny_family(spec))))
    blocks = max(prefix_bench.cache_blocks(w, spec.name, tokens, cache_prompts) for w in shared)
    # vLLM refuses a KV cache that cannot hold one max_model_len sequence: the capped runs
    # serve at most what their cache holds.
    capped = spec.model_copy(
        update={
            "engine_args": dict(spec.engine_args) | {"num_gpu_blocks_override": blocks},
            "max_model_len": min(spec.max_model_len, blocks * prefix_bench.BLOCK_TOKENS),
        }
    )
    for variant in variants:
        if set(variant.workloads) <= set(SHARED_PREFIX_WORKLOADS):
            spec_of[variant.name] = capped
    ideal = {w.name: prefix_bench.ideal_hit_rate(w, spec.name, tokens) for w in shared}
    return spec_of, ideal, tokens
