"""The local data plane's commands: `servestack local serve|bench|top` (and their aliases
`serve --local`, `bench --local`, `top`). Registered on the CLI by `infra/cli/app.py`; the
bench's orchestration is `infra.cli.bench`'s."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.live import Live
from rich.table import Table

from infra.cli import progress
from infra.cli.common import (
    EngineOption,
    LocalFlag,
    StackArg,
    TimeScaleOption,
    choose_engine,
    console,
    errors,
    free_port,
    local_modules,
    one_model,
    positive,
    require_local,
)
from infra.platform.config import load_stack
from infra.platform.stack_config import DEFAULT_STACK
from serving.errors import ServestackError
from serving.local.bench.workloads import DEFAULT_ADAPTERS


def serve_command(
    stack: StackArg = DEFAULT_STACK,
    model: Annotated[str | None, typer.Option(help="The stack model to serve.")] = None,
    local: LocalFlag = False,
    port: Annotated[int, typer.Option(help="HTTP port of the OpenAI endpoint.")] = 8000,
    engine: EngineOption = "simulated",
    time_scale: TimeScaleOption = 1.0,
    cache_tokens: Annotated[
        int | None,
        typer.Option(help="Prefix-cache tokens per replica. [default: the plan's KV capacity]"),
    ] = None,
) -> None:
    """Serve a model's compiled Serve application locally until Ctrl-C.

    The same builder, arguments and cluster environment as the RayService, changed only where
    the CPU demands it; the engine is a simulation timed from the model's plan.
    """
    require_local(local, "serve")
    loaded = load_stack(stack)
    spec = one_model(loaded.profiles, model, loaded.path)
    positive(time_scale, "--time-scale", allow_zero=True)
    if cache_tokens is not None:
        positive(cache_tokens, "--cache-tokens", allow_zero=True)
    free_port(port)
    chosen = choose_engine(engine)
    runtime, simulation = local_modules()
    settings = None
    if chosen == "simulated":
        settings = simulation.settings_from_plan(
            spec, time_scale=time_scale, cache_tokens=cache_tokens
        )
    label = "simulated engine" if chosen == "simulated" else "vLLM CPU build, tiny model"
    console.print(f"starting a local Ray and {spec.name} ({label}) ...", highlight=False)

    shown = progress.ServeProgress(errors)

    def ready(running: Any) -> None:
        shown.ready()
        console.print(
            f"{spec.name} is serving the OpenAI API at {running.endpoint}/v1 — Ctrl-C to stop",
            highlight=False,
        )

    try:
        runtime.serve_until_stopped(
            spec, settings, engine=chosen, port=port, on_ready=ready, on_state=shown.state
        )
    except runtime.LocalServeError as exc:
        errors.print(f"error: {exc}", highlight=False, markup=False)
        raise typer.Exit(1) from None
    finally:
        shown.close()
    console.print("stopped; the local Ray is shut down", highlight=False)


def bench_command(
    stack: StackArg = DEFAULT_STACK,
    model: Annotated[str | None, typer.Option(help="The stack model to benchmark.")] = None,
    local: LocalFlag = False,
    url: Annotated[
        str | None,
        typer.Option(
            help="Measure the deployed service at this OpenAI base address against its plan: "
            "http://HOST:PORT or https://EDGE/MODEL (/v1/chat/completions is appended); the key "
            "from $SERVESTACK_API_KEY."
        ),
    ] = None,
    requests: Annotated[
        int | None,
        typer.Option(
            help="Requests per workload (multi-prompt and hot-prompt send twice as many). "
            "[default: 24 with --local, 40 with --url]"
        ),
    ] = None,
    concurrency: Annotated[int, typer.Option(help="Requests in flight at most.")] = 12,
    sweep: Annotated[
        bool,
        typer.Option(
            help="With --url: closed loops at 1, 2, 4, ... clients until requests/s stops rising."
        ),
    ] = False,
    rate: Annotated[
        float | None,
        typer.Option(help="With --url: an open loop, Poisson arrivals at this many requests/s."),
    ] = None,
    seed: Annotated[int, typer.Option(help="With --rate: the arrivals' seed.")] = 0,
    max_seconds: Annotated[
        float | None,
        typer.Option(help="With --url: stop sending each load's requests after this long."),
    ] = None,
    replicas: Annotated[int, typer.Option(help="Replicas of the model, fixed.")] = 2,
    prefixes: Annotated[
        int, typer.Option(help="Shared system prompts (multi-prompt, hot-prompt).")
    ] = 4,
    prefix_tokens: Annotated[int, typer.Option(help="Tokens per shared system prompt.")] = 2000,
    cache_prompts: Annotated[
        float,
        typer.Option(
            help="Prefix-cache capacity per replica, in shared system prompts: below --prefixes "
            "so that routing decides the hit rate, as with many tenants on a real cluster."
        ),
    ] = 3.0,
    hot_share: Annotated[
        float,
        typer.Option(help="Share of the hot-prompt workload's requests on its one hot prompt."),
    ] = 0.5,
    time_scale: TimeScaleOption = 1.0,
    engine: EngineOption = "simulated",
    workload: Annotated[
        list[str] | None,
        typer.Option(
            help="Only these workloads: decode-heavy, prefill-heavy, multi-prompt, hot-prompt "
            "(a profile with LoRA adapters runs many-adapters)."
        ),
    ] = None,
    adapters: Annotated[
        int,
        typer.Option(
            help="A profile with LoRA adapters: the adapters the many-adapters workload spreads "
            "its requests over, at the profile's slots per replica."
        ),
    ] = DEFAULT_ADAPTERS,
    only_variants: Annotated[
        list[str] | None,
        typer.Option(
            "--variant", help="Only these configurations, e.g. fast-paths-on/power-of-two."
        ),
    ] = None,
    repeats: Annotated[
        int,
        typer.Option(
            help="Runs of each configuration, interleaved (A B C A B C ...): each figure is "
            "their median and min–max, each ratio the ratio of medians with its spread."
        ),
    ] = 3,
    out: Annotated[
        Path | None, typer.Option(help="Output directory. [default: bench/MODEL]")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print bench.json's document instead of the table.")
    ] = False,
) -> None:
    """Benchmark the fast paths and the router side by side on the local application, or with
    --url the deployed service against its plan.

    Configurations: fast paths on and off (power of two on both), prefix affinity against
    power of two (fast paths on); with --engine vllm, also a bare vLLM server on the same
    requests. With --url: the same workloads and load generator, in a closed loop
    (--concurrency), a sweep (--sweep) or an open loop (--rate), each figure beside the plan's
    estimate. Writes bench.json and bench.png.
    """
    if not 0 <= hot_share < 1:
        raise ServestackError(
            "command line", "--hot-share", f"{hot_share:g} is not a share of the requests",
            "use a number from 0 up to (not including) 1, e.g. --hot-share 0.5",
        )  # fmt: skip
    if url is not None:
        if local:
            raise ServestackError(
                "command line", "--local/--url", "say what to measure: --local or --url",
                "servestack bench --local, or servestack bench --url URL --model NAME",
            )  # fmt: skip
        local_only = {"--replicas": replicas != 2, "--cache-prompts": cache_prompts != 3.0,
                      "--time-scale": time_scale != 1.0, "--engine": engine != "simulated",
                      "--variant": bool(only_variants),
                      "--adapters": adapters != DEFAULT_ADAPTERS}  # fmt: skip
        for flag, given in local_only.items():
            if given:
                raise ServestackError(
                    "command line", flag, "applies to --local runs only",
                    "drop it: a --url run measures the service as it is deployed",
                )  # fmt: skip
        bench_url_command(
            stack, model, url, requests, concurrency, sweep, rate, seed, max_seconds, repeats,
            workload, prefixes, prefix_tokens, hot_share, out, as_json,
        )  # fmt: skip
        return
    for flag, given in (("--sweep", sweep), ("--rate", rate is not None),
                        ("--max-seconds", max_seconds is not None)):  # fmt: skip
        if given:
            raise ServestackError(
                "command line", flag, "applies to --url runs only",
                "drop it, or measure a deployed service: servestack bench --url URL",
            )  # fmt: skip
    requests = 24 if requests is None else requests
    require_local(local, "bench")
    loaded = load_stack(stack)
    spec = one_model(loaded.profiles, model, loaded.path)
    for value, flag in (
        (requests, "--requests"), (concurrency, "--concurrency"), (replicas, "--replicas"),
        (prefixes, "--prefixes"), (prefix_tokens, "--prefix-tokens"), (repeats, "--repeats"),
        (adapters, "--adapters"),
    ):  # fmt: skip
        positive(value, flag)
    positive(cache_prompts, "--cache-prompts", allow_zero=True)
    positive(time_scale, "--time-scale", allow_zero=True)
    chosen = choose_engine(engine)
    local_modules()
    from infra.cli import bench as bench_run
    from infra.cli import bench_report

    options = bench_run.BenchOptions(
        engine=chosen, requests=requests, concurrency=concurrency, replicas=replicas,
        prefixes=prefixes, prefix_tokens=prefix_tokens, cache_prompts=cache_prompts,
        hot_share=hot_share, time_scale=time_scale, workloads=tuple(workload or ()),
        variants=tuple(only_variants or ()), repeats=repeats, adapters=adapters,
    )  # fmt: skip
    out_dir = out if out is not None else Path("bench") / spec.name
    try:
        outcome = bench_run.run(
            spec, options, out_dir, shown_on=errors, quiet=as_json,
            command=" ".join(["servestack", *sys.argv[1:]]),
        )  # fmt: skip
    except bench_run.BenchStartError as exc:
        errors.print(f"error: {exc}", highlight=False, markup=False)
        raise typer.Exit(1) from None
    if as_json:
        print(json.dumps(outcome.document, indent=2))
    else:
        bench_report.print_bench(console, outcome.reports, outcome.spreads, chosen)
        wrote = f"wrote {out_dir / 'bench.json'} and {out_dir / 'bench.png'}"
        console.print(wrote, highlight=False)
    failed = [f"{r.variant} {r.workload} (repetition {r.repetition}): {r.failed}"
              for r in outcome.reports if r.failed]  # fmt: skip
    if failed:
        if as_json:  # the table, which lists them, was not drawn
            bench_report.print_errors(errors, outcome.reports)
        errors.print(
            f"error: requests failed ({'; '.join(failed)}), so these configurations did not "
            f"serve the same requests and the ratios do not compare them; the errors are above "
            f"and the local Ray's logs in {out_dir / 'logs'}",
            highlight=False,
        )
        raise typer.Exit(1)


def bench_url_command(
    stack: str, model: str | None, url: str, requests: int | None, concurrency: int,
    sweep: bool, rate: float | None, seed: int, max_seconds: float | None, repeats: int,
    workload: list[str] | None, prefixes: int, prefix_tokens: int, hot_share: float,
    out: Path | None, as_json: bool,
) -> None:  # fmt: skip
    """`bench --url`: the flags checked, the run made (`infra.cli.bench_url`)."""
    from infra.cli import bench_url

    loaded = load_stack(stack)
    spec = one_model(loaded.profiles, model, loaded.path)
    requests = bench_url.URL_REQUESTS if requests is None else requests
    for value, flag in ((requests, "--requests"), (concurrency, "--concurrency"),
                        (repeats, "--repeats"), (prefixes, "--prefixes"),
                        (prefix_tokens, "--prefix-tokens")):  # fmt: skip
        positive(value, flag)
    bench_url.check_modes(sweep, rate, max_seconds)
    options = bench_url.UrlOptions(
        url=url, requests=requests, concurrency=concurrency, sweep=sweep, rate=rate, seed=seed,
        max_seconds=max_seconds, repeats=repeats, workloads=tuple(workload or ()),
        prefixes=prefixes, prefix_tokens=prefix_tokens, hot_share=hot_share,
    )  # fmt: skip
    out_dir = out if out is not None else Path("bench") / f"{spec.name}-url"
    bench_url.run_url(
        spec, stack, options, out_dir, " ".join(["servestack", *sys.argv[1:]]), as_json
    )


def top_command(
    local: Annotated[
        bool, typer.Option("--local", help="Watch every local run on this machine.")
    ] = False,
    url: Annotated[
        list[str] | None,
        typer.Option(
            help="A metrics endpoint to watch, e.g. a port-forwarded Ray head's "
            "http://127.0.0.1:8080/metrics (repeatable)."
        ),
    ] = None,
    interval: Annotated[float, typer.Option(help="Seconds between scrapes.")] = 2.0,
    seconds: Annotated[
        float | None, typer.Option(help="Stop after this many seconds; unset, run until Ctrl-C.")
    ] = None,
) -> None:
    """Live per-model figures (requests/s, TTFT, inter-token latency, queue, KV cache, prefix
    hits) from the same metrics the dashboard draws."""
    from serving.local.runtime.observed import running
    from serving.observability import top

    positive(interval, "--interval")
    if local == bool(url):
        raise ServestackError(
            "command line", "--local/--url", "say where to look: --local or --url, not both",
            "servestack local top, or servestack top --url http://HOST:8080/metrics",
        )  # fmt: skip

    def endpoints() -> list[str]:
        if url:
            return list(url)
        return [u for run in running() for u in run.metrics.values()]

    if local and not endpoints():
        raise ServestackError(
            "command line", "--local", "no local run is serving on this machine",
            "start one: servestack local serve, or servestack local bench",
        )  # fmt: skip
    with contextlib.ExitStack() as stack:
        show: Callable[[Table], None] = console.print
        if console.is_terminal:
            show = stack.enter_context(Live(console=console, refresh_per_second=4)).update
        watched = top.watch(endpoints, show, interval_s=interval, seconds=seconds)
    for endpoint, why in watched.never_answered.items():
        errors.print(
            f"error: {endpoint} answered none of this watch's scrapes (the last {why}); "
            "check that the address is the exporter's (a port-forward to a Ray head's :8080 "
            "still running, a local run's metrics port from its log) and that it is not stuck",
            highlight=False,
        )
    if watched.never_answered:
        raise typer.Exit(1)
