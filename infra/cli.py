"""The `servestack` command line: plan models before paying for GPUs.

Bad input (a stack file, a profile, a flag) ends with one message naming the file, the field and
a fix, exit code 2, and no traceback.
"""

from __future__ import annotations

import contextlib
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.live import Live
from rich.text import Text

from infra import check_edge, progress, report
from infra.config import load_stack
from infra.platform import compile_model, plan_platform
from infra.render import check_out_dir, model_objects, render_model
from infra.stack_config import DEFAULT_STACK
from serving.catalog import ARCHITECTURES
from serving.errors import ServestackError, unknown_key_fix
from serving.loading import display_path
from serving.local.app import ENGINES, Engine
from serving.planner import plan
from serving.recommend import (
    DEFAULT_ITL_TARGET_S,
    DEFAULT_TTFT_TARGET_S,
    catalog_spec,
    recommend,
)
from serving.shortlist import shortlist
from serving.spec import ModelSpec

app = typer.Typer(
    help="Serve LLMs on GKE with Ray Serve: plan, render and preview, offline.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
# Piped output (CI logs, files) has no terminal width to follow; rich would assume 80 columns
# and fold the plan's table.
PIPED_WIDTH = 110
console = Console() if sys.stdout.isatty() else Console(width=PIPED_WIDTH)
errors = Console(stderr=True, soft_wrap=True)


@app.callback()
def _root() -> None:
    """Serve LLMs on GKE with Ray Serve: plan, render and preview, offline."""


StackArg = Annotated[str, typer.Argument(help="Stack name: stacks/Pulumi.<STACK>.yaml.")]


@app.command("plan")
def plan_command(
    stack: StackArg = DEFAULT_STACK,
    model: Annotated[str | None, typer.Option(help="Only this model of the stack.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    recommend_model: Annotated[
        str | None,
        typer.Option(
            "--recommend",
            metavar="MODEL",
            help="Rank machines and layouts for MODEL: a stack model or a catalog architecture.",
        ),
    ] = None,
    max_itl_ms: Annotated[
        float, typer.Option(help="Inter-token latency target for --recommend.")
    ] = DEFAULT_ITL_TARGET_S * 1e3,
    max_ttft_ms: Annotated[
        float, typer.Option(help="Time-to-first-token target for --recommend.")
    ] = DEFAULT_TTFT_TARGET_S * 1e3,
    show_all: Annotated[
        bool,
        typer.Option(
            "--all", help="With --recommend: every candidate, refused ones with their rule."
        ),
    ] = False,
) -> None:
    """Memory, GPUs and nodes, latency and cost for each model of a stack.

    Exits 1 when a model's layout cannot work (an error verdict).
    """
    itl_target = _positive_ms(max_itl_ms, "--max-itl-ms")
    ttft_target = _positive_ms(max_ttft_ms, "--max-ttft-ms")
    loaded = load_stack(stack)
    prices = loaded.config.prices
    if recommend_model is not None:
        spec = _pick(loaded.profiles, recommend_model, loaded.path, "--recommend", catalog=True)
        ranked = recommend(spec, itl_target, ttft_target, prices)
        if as_json:
            print(json.dumps([c.model_dump() for c in ranked], indent=2))
        else:
            answer = shortlist(ranked, itl_target, ttft_target, prices, show_all=show_all)
            report.print_recommendation(console, spec, answer, max_itl_ms, max_ttft_ms)
        return
    specs = (
        [_pick(loaded.profiles, model, loaded.path, "--model")]
        if model
        else list(loaded.profiles.values())
    )
    plans = [plan(spec, prices) for spec in specs]
    if as_json:
        print(json.dumps({"stack": stack, "plans": [p.model_dump() for p in plans]}, indent=2))
    else:
        for spec, model_plan in zip(specs, plans, strict=True):
            report.print_plan(console, spec, model_plan)
    if not all(p.ok for p in plans):
        raise typer.Exit(1)


@app.command("init")
def init_command(
    model: Annotated[
        str,
        typer.Argument(
            help="A catalog model, or a Hugging Face repo (org/name) with --architecture."
        ),
    ],
    stack: Annotated[str, typer.Option(help="The stack to add the model to.")] = DEFAULT_STACK,
    architecture: Annotated[
        str | None, typer.Option(help="The catalog architecture of a Hugging Face repo.")
    ] = None,
    accelerator: Annotated[
        str | None, typer.Option(help="Only this accelerator, e.g. h100-80gb.")
    ] = None,
    max_model_len: Annotated[
        int | None, typer.Option(help="Longest sequence served. [default: 8192, or less]")
    ] = None,
    name: Annotated[
        str | None, typer.Option(help="Served model id and profile name. [default: from MODEL]")
    ] = None,
) -> None:
    """Write stacks/models/NAME.yaml from the planner's recommendation and add it to the stack.

    Never overwrites a profile. `servestack plan` and `preview` run on it at once.
    """
    from infra.init import init_model

    written = init_model(
        model, stack, architecture=architecture, accelerator=accelerator,
        max_model_len=max_model_len, name=name,
    )  # fmt: skip
    report.print_init(console, written, stack)


@app.command("pools")
def pools_command(
    stack: StackArg = DEFAULT_STACK,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """The cluster and node pools `pulumi up` builds for a stack, derived and checked offline.

    Exits 2, naming the file, the key and a fix, where the stack cannot be built.
    """
    platform = plan_platform(load_stack(stack))
    if not as_json:
        report.print_platform(console, platform)
        return
    document = platform.model_dump(mode="json")
    for printed, pool in zip(document["gpu_pools"], platform.gpu_pools, strict=True):
        printed.update(
            compact=pool.compact, provisioning=pool.provisioning, node_selector=pool.node_selector
        )
    print(json.dumps(document, indent=2))


@app.command("render")
def render_command(
    stack: StackArg = DEFAULT_STACK,
    out: Annotated[
        Path | None, typer.Option(help="Output directory. [default: rendered/STACK]")
    ] = None,
    model: Annotated[str | None, typer.Option(help="Only this model of the stack.")] = None,
) -> None:
    """Write each model's serveConfigV2, environment, worker shapes and Kubernetes manifests.

    A model whose layout cannot work is not written; the command then exits 1.
    """
    loaded = load_stack(stack)
    out_dir = out if out is not None else Path("rendered") / stack
    check_out_dir(out_dir)
    chosen = loaded.profiles
    if model:
        wanted = _pick(loaded.profiles, model, loaded.path, "--model")
        chosen = {key: spec for key, spec in chosen.items() if spec is wanted}
    plans = {profile: plan(spec, loaded.config.prices) for profile, spec in chosen.items()}
    compiled = {
        profile: compile_model(loaded, spec, plans[profile])
        for profile, spec in chosen.items()
        if plans[profile].ok
    }
    # Every model's objects are checked before the first file is written: a refused input
    # leaves nothing behind.
    for profile, model_compiled in compiled.items():
        model_objects(model_compiled, profile, loaded)
    failed = False
    for profile, spec in chosen.items():
        model_plan = plans[profile]
        if not model_plan.ok:
            report.print_verdicts(errors, model_plan, prefix=f"{spec.name}: not rendered: ")
            failed = True
            continue
        for path in render_model(compiled[profile], profile, loaded, out_dir):
            console.print(f"wrote {path}", highlight=False)
        report.print_verdicts(errors, model_plan, prefix=f"{spec.name}: ")
    if failed:
        raise typer.Exit(1)


@app.command("check-edge")
def check_edge_command(
    url: Annotated[str, typer.Argument(help="The edge's address, e.g. https://llm.example.com.")],
    model: Annotated[str, typer.Option(help="The served model whose route to probe.")],
    ca_file: Annotated[
        Path | None, typer.Option(help="CA bundle that signed the edge's certificate.")
    ] = None,
) -> None:
    """After `pulumi up`: probe a model's route without a key, with a wrong key, with the key
    under Basic and with the key in $SERVESTACK_API_KEY; exit 1 unless the gate holds."""
    results = check_edge.check_edge(url, model, ca_file=str(ca_file) if ca_file else None)
    for result in results:
        answer = result.status if result.status is not None else f"no answer ({result.error})"
        wanted = "refused" if result.probe.want_refused else "answered"
        mark = "ok  " if result.holds else "FAIL"
        console.print(f"{mark} {result.probe.name}: {answer} (should be {wanted})", highlight=False)
    if not all(result.holds for result in results):
        errors.print(f"the edge's gate does not hold for {check_edge.route_url(url, model)}")
        raise typer.Exit(1)


@app.command("preview")
def preview_command(
    stack: StackArg = DEFAULT_STACK,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    policy_config: Annotated[
        Path | None,
        typer.Option(
            help="Policy settings as for `pulumi preview --policy-pack-config` (JSON).",
        ),
    ] = None,
) -> None:
    """Run the stack's Pulumi program under the mock engine and judge it with the policy pack.

    No cloud account, Pulumi CLI or cluster. Exits 1 on a mandatory violation.
    """
    # The Pulumi SDKs take a second to import; only this command needs them.
    from infra.preview import preview, read_policy_config
    from policies.pack import POLICIES

    overrides = read_policy_config(policy_config) if policy_config else None
    result = preview(stack, overrides=overrides)
    if as_json:
        document = {
            "stack": stack,
            "resources": [
                {"type": r.type, "name": r.name, "urn": r.urn, "parent": r.parent}
                for r in result.resources
                if r.custom
            ],
            "violations": [asdict(v) for v in result.violations],
        }
        print(json.dumps(document, indent=2))
    else:
        report.print_preview(console, result, len(POLICIES))
    if result.mandatory:
        raise typer.Exit(1)


# --- the local CPU data plane (serving.local) ------------------------------------------------

LocalFlag = Annotated[
    bool,
    typer.Option(
        "--local", help="Run on this machine's CPU: real Ray Serve and HAProxy, simulated engine."
    ),
]
EngineOption = Annotated[
    str,
    typer.Option(
        help="simulated: the simulation timed from the model's plan; vllm: vLLM 0.22's CPU build "
        "serving a tiny model of the profile's family."
    ),
]
TimeScaleOption = Annotated[
    float,
    typer.Option(help="Multiplies the simulated engine's plan-derived prefill and decode times."),
]


@app.command("serve")
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
    _require_local(local, "serve")
    loaded = load_stack(stack)
    spec = _one_model(loaded.profiles, model, loaded.path)
    _positive(time_scale, "--time-scale", allow_zero=True)
    if cache_tokens is not None:
        _positive(cache_tokens, "--cache-tokens", allow_zero=True)
    _free_port(port)
    chosen = _engine(engine)
    runtime, simulation = _local_modules()
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
        errors.print(f"error: {exc}", highlight=False)
        raise typer.Exit(1) from None
    finally:
        shown.close()
    console.print("stopped; the local Ray is shut down", highlight=False)


@app.command("bench")
def bench_command(
    stack: StackArg = DEFAULT_STACK,
    model: Annotated[str | None, typer.Option(help="The stack model to benchmark.")] = None,
    local: LocalFlag = False,
    requests: Annotated[
        int,
        typer.Option(
            help="Requests per workload (multi-prompt and hot-prompt send twice as many)."
        ),
    ] = 24,
    concurrency: Annotated[int, typer.Option(help="Requests in flight at most.")] = 12,
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
            help="Only these workloads: decode-heavy, prefill-heavy, multi-prompt, hot-prompt."
        ),
    ] = None,
    only_variants: Annotated[
        list[str] | None,
        typer.Option(
            "--variant", help="Only these configurations, e.g. fast-paths-on/power-of-two."
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="Output directory. [default: bench/MODEL]")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print bench.json's document instead of the table.")
    ] = False,
) -> None:
    """Benchmark the fast paths and the router side by side on the local application.

    Configurations: fast paths on and off (power of two on both), prefix affinity against
    power of two (fast paths on); with --engine vllm, also a bare vLLM server on the same
    requests. Writes bench.json and bench.png.
    """
    _require_local(local, "bench")
    loaded = load_stack(stack)
    spec = _one_model(loaded.profiles, model, loaded.path)
    for value, flag in (
        (requests, "--requests"), (concurrency, "--concurrency"), (replicas, "--replicas"),
        (prefixes, "--prefixes"), (prefix_tokens, "--prefix-tokens"),
    ):  # fmt: skip
        _positive(value, flag)
    _positive(cache_prompts, "--cache-prompts", allow_zero=True)
    _positive(time_scale, "--time-scale", allow_zero=True)
    if not 0 <= hot_share < 1:
        raise ServestackError(
            "command line", "--hot-share", f"{hot_share:g} is not a share of the requests",
            "use a number from 0 up to (not including) 1, e.g. --hot-share 0.5",
        )  # fmt: skip
    chosen = _engine(engine)
    _, simulation = _local_modules()
    from infra import bench_report
    from serving.local import bench, chart, prefix_bench, vllm_bench

    wanted = workload or list(bench.WORKLOADS)
    for name in wanted:
        if name not in bench.WORKLOADS:
            raise ServestackError(
                "command line", "--workload", f"no workload '{name}'",
                unknown_key_fix(name, bench.WORKLOADS, "workloads"),
            )  # fmt: skip
    workloads = {
        name: w
        for name, w in bench.default_workloads(
            requests, concurrency, prefixes, prefix_tokens, hot_share
        ).items()
        if name in wanted
    }
    settings = None
    if chosen == "simulated":
        settings = simulation.settings_from_plan(
            spec, time_scale=time_scale, cache_tokens=int(cache_prompts * (prefix_tokens + 50))
        )
    candidates = (
        bench.default_variants(spec) if chosen == "simulated" else vllm_bench.vllm_variants()
    )
    variants = [
        v.model_copy(update={"workloads": tuple(w for w in v.workloads if w in workloads)})
        for v in candidates
    ]
    named = [v.name for v in candidates]
    for name in only_variants or []:
        if name not in named:
            raise ServestackError(
                "command line", "--variant", f"no configuration '{name}'",
                unknown_key_fix(name, named, "configurations"),
            )  # fmt: skip
    variants = [
        v for v in variants if v.workloads and (not only_variants or v.name in only_variants)
    ]
    runs = sum(len(v.workloads) for v in variants)
    spec_of = {v.name: spec for v in variants}
    ideal: dict[str, float] = {}
    if chosen == "vllm":
        spec_of, ideal = _vllm_router_caches(spec, variants, workloads, cache_prompts)
    out_dir = out if out is not None else Path("bench") / spec.name
    out_dir.mkdir(parents=True, exist_ok=True)
    reports = []
    with progress.bench_progress(errors, runs, quiet=as_json) as shown:
        for variant in variants:
            try:
                if spec_of[variant.name] is not spec:  # the real engine's router runs
                    reports += prefix_bench.run_routers(
                        spec_of[variant.name], variant, workloads, replicas, out_dir / "logs",
                        progress=shown,
                    )  # fmt: skip
                    continue
                reports += bench.run_variant(
                    spec_of[variant.name], variant, workloads, settings, replicas,
                    out_dir / "logs", progress=shown, engine=chosen,
                )  # fmt: skip
            except bench.VariantStartError as exc:
                errors.print(f"error: {variant.name}: {exc}", highlight=False)
                raise typer.Exit(1) from None
    ratios = bench.ratios(reports) if chosen == "simulated" else vllm_bench.vllm_ratios(reports)
    ratios |= ideal
    document = {
        "command": " ".join(["servestack", *sys.argv[1:]]),
        "model": spec.name,
        "engine": chosen,
        "replicas": replicas,
        "simulation": settings.model_dump() if settings is not None else None,
        "workloads": {name: w.model_dump() for name, w in workloads.items()},
        "variants": [v.model_dump() for v in variants],
        "ratios": ratios,
        "reports": [r.model_dump() for r in reports],
    }
    (out_dir / "bench.json").write_text(json.dumps(document, indent=2) + "\n")
    chart.write_chart(reports, out_dir / "bench.png", engine=chosen)
    if as_json:
        print(json.dumps(document, indent=2))
    else:
        bench_report.print_bench(console, reports, ratios, chosen)
        wrote = f"wrote {out_dir / 'bench.json'} and {out_dir / 'bench.png'}"
        console.print(wrote, highlight=False)
    failed = [f"{r.variant} {r.workload}: {r.failed}" for r in reports if r.failed]
    if failed:
        errors.print(
            f"error: requests failed ({'; '.join(failed)}), so these configurations did not "
            f"serve the same requests and the ratios do not compare them; the errors are above "
            f"and the local Ray's logs in {out_dir / 'logs'}",
            highlight=False,
        )
        raise typer.Exit(1)


def _vllm_router_caches(
    spec: Any, variants: list[Any], workloads: Any, cache_prompts: float
) -> tuple[dict[str, Any], dict[str, float]]:
    """With the real engine, the variants that compare routers (shared-prompt workloads only)
    get prefix caches of `cache_prompts` prompts (`num_gpu_blocks_override`); and the hit rate
    of ideal placement on each such workload."""
    from serving.local import bench, prefix_bench
    from serving.local.app import tiny_family
    from serving.local.tiny_models import tiny_model

    shared = [workloads[w] for w in bench.SHARED_PREFIX_WORKLOADS if w in workloads]
    spec_of = {v.name: spec for v in variants}
    if not shared or not cache_prompts:
        return spec_of, {}
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
        if set(variant.workloads) <= set(bench.SHARED_PREFIX_WORKLOADS):
            spec_of[variant.name] = capped
    ideal = {
        f"{w.name}: ideal placement cache hit rate": prefix_bench.ideal_hit_rate(
            w, spec.name, tokens
        )
        for w in shared
    }
    return spec_of, ideal


@app.command("top")
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
    from serving import top
    from serving.local.observed import running

    _positive(interval, "--interval")
    if local == bool(url):
        raise ServestackError(
            "command line", "--local/--url", "say where to look: --local or --url, not both",
            "servestack top --local, or servestack top --url http://HOST:8080/metrics",
        )  # fmt: skip

    def endpoints() -> list[str]:
        if url:
            return list(url)
        return [u for run in running() for u in run.metrics.values()]

    if local and not endpoints():
        raise ServestackError(
            "command line", "--local", "no local run is serving on this machine",
            "start one: servestack serve --local, or servestack bench --local",
        )  # fmt: skip
    with contextlib.suppress(KeyboardInterrupt):
        if not console.is_terminal:
            top.watch(endpoints, console.print, interval_s=interval, seconds=seconds)
            return
        with Live(console=console, refresh_per_second=4) as live:
            top.watch(endpoints, live.update, interval_s=interval, seconds=seconds)


def _engine(name: str) -> Engine:
    for engine in ENGINES:
        if engine == name:
            return engine
    raise ServestackError(
        "command line", "--engine", f"no engine '{name}'",
        unknown_key_fix(name, ENGINES, "engines"),
    )  # fmt: skip


def _require_local(local: bool, command: str) -> None:
    if not local:
        raise ServestackError(
            "command line", "--local",
            f"`servestack {command}` runs the local CPU data plane only; a cluster is served by "
            "`pulumi up`", f"add --local: servestack {command} --local",
        )  # fmt: skip


def _local_modules() -> tuple[Any, Any]:
    """serving.local's Ray-side modules, or an error naming the missing extra."""
    try:
        import ray.serve  # noqa: F401

        from serving.local import runtime, simulation
    except ImportError as exc:
        raise ServestackError(
            "environment", "ray", f"the local data plane needs Ray Serve LLM ({exc})",
            "pip install 'servestack[local]'",
        ) from None  # fmt: skip
    return runtime, simulation


def _one_model(profiles: dict[str, ModelSpec], name: str | None, source: Path) -> ModelSpec:
    if name:
        return _pick(profiles, name, source, "--model")
    if len(profiles) == 1:
        return next(iter(profiles.values()))
    raise ServestackError(
        display_path(source), "--model",
        f"the stack serves {len(profiles)} models and a local run takes one",
        f"add --model with one of: {', '.join(sorted(profiles))}",
    )  # fmt: skip


def _positive(value: float, flag: str, *, allow_zero: bool = False) -> None:
    if value < 0 or (value == 0 and not allow_zero):
        raise ServestackError(
            "command line", flag, f"{value:g} is not allowed here",
            "use a positive number" if not allow_zero else "use zero or a positive number",
        )  # fmt: skip


def _free_port(port: int) -> None:
    import socket

    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            raise ServestackError(
                "command line", "--port", f"port {port} is in use on this machine",
                "pick a free one, e.g. --port 8001",
            ) from None  # fmt: skip


def _pick(
    profiles: dict[str, ModelSpec], name: str, source: Path, flag: str, *, catalog: bool = False
) -> ModelSpec:
    if name in profiles:
        return profiles[name]
    for spec in profiles.values():
        if spec.name == name:
            return spec
    if catalog and name in ARCHITECTURES:
        return catalog_spec(name)
    known = sorted({*profiles, *(ARCHITECTURES if catalog else ())})
    what = "stack models and catalog architectures" if catalog else "stack models"
    raise ServestackError(
        display_path(source), flag, f"the stack has no model '{name}'",
        unknown_key_fix(name, known, what),
    )  # fmt: skip


def _positive_ms(value: float, flag: str) -> float:
    if value <= 0:
        raise ServestackError(
            "command line", flag, f"{value:g} ms is not a latency target",
            "use a positive number of milliseconds, e.g. 50",
        )  # fmt: skip
    return value / 1e3


def main() -> None:
    from infra import faults_cli

    faults_cli.register(app, console, _one_model, _require_local)
    try:
        app()
    except ServestackError as exc:
        errors.print(Text.assemble(("error: ", "bold red"), exc.render()), highlight=False)
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
