"""The `servestack` command line: plan models before paying for GPUs.

Bad input (a stack file, a profile, a flag) ends with one message naming the file, the field and
a fix, exit code 2, and no traceback.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from infra import report
from infra.config import DEFAULT_STACK, load_stack
from infra.platform import plan_platform
from infra.preview import preview, read_policy_config
from infra.render import render_model
from policies.pack import POLICIES
from serving.catalog import ARCHITECTURES
from serving.errors import ServestackError, unknown_key_fix
from serving.loading import display_path
from serving.planner import plan
from serving.recommend import catalog_spec, recommend
from serving.spec import ModelSpec

app = typer.Typer(
    help="Serve LLMs on GKE with Ray Serve: plan, render and preview, offline.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
# Piped output (CI logs, files) has no terminal width to follow; rich would assume 80 columns
# and fold the plan's table.
console = Console() if sys.stdout.isatty() else Console(width=110)
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
    ] = 50.0,
    max_ttft_ms: Annotated[
        float, typer.Option(help="Time-to-first-token target for --recommend.")
    ] = 2000.0,
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
            report.print_recommendation(console, spec, ranked, max_itl_ms, max_ttft_ms)
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
    chosen = loaded.profiles
    if model:
        wanted = _pick(loaded.profiles, model, loaded.path, "--model")
        chosen = {key: spec for key, spec in chosen.items() if spec is wanted}
    failed = False
    for profile, spec in chosen.items():
        model_plan = plan(spec, loaded.config.prices)
        if not model_plan.ok:
            report.print_verdicts(errors, model_plan, prefix=f"{spec.name}: not rendered: ")
            failed = True
            continue
        for path in render_model(spec, profile, loaded, out_dir):
            console.print(f"wrote {path}", highlight=False)
    if failed:
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
    try:
        app()
    except ServestackError as exc:
        errors.print(Text.assemble(("error: ", "bold red"), exc.render()), highlight=False)
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
