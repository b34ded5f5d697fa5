"""The `servestack` command line: plan models before paying for GPUs.

Bad input (a stack file, a profile, a flag) ends with one message naming the file, the field and
a fix, exit code 2, and no traceback.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from infra.cli import bench_url, check_edge, report, report_platform
from infra.cli import capacity as cli_capacity
from infra.cli import faults as cli_faults
from infra.cli import local as cli_local
from infra.cli.common import (
    StackArg,
    console,
    errors,
    local_form,
    pick,
    positive_ms,
)
from infra.cli.render import check_out_dir, render_model
from infra.cli.report_chains import print_chain_costs
from infra.cli.report_measured import print_recommend_calibration
from infra.platform.chain_costs import chain_costs, recommended_chain_costs
from infra.platform.config import load_stack
from infra.platform.plan import compile_model, plan_platform, stack_model_objects
from infra.platform.stack_config import DEFAULT_STACK
from serving.errors import ServestackError
from serving.plan.planner import plan
from serving.recommend.ranking import (
    DEFAULT_ITL_TARGET_S,
    DEFAULT_TTFT_TARGET_S,
    recommend,
)
from serving.recommend.shortlist import shortlist

app = typer.Typer(
    help="Serve LLMs on GKE with Ray Serve: plan, render and preview, offline.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    """Serve LLMs on GKE with Ray Serve: plan, render and preview, offline."""


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
    itl_target = positive_ms(max_itl_ms, "--max-itl-ms")
    ttft_target = positive_ms(max_ttft_ms, "--max-ttft-ms")
    loaded = load_stack(stack)
    prices = loaded.config.prices
    if recommend_model is not None:
        spec = pick(loaded.profiles, recommend_model, loaded.path, "--recommend", catalog=True)
        calibration = loaded.calibration(spec)
        ranked = recommend(spec, itl_target, ttft_target, prices, calibration)
        if as_json:
            print(json.dumps([c.model_dump() for c in ranked], indent=2))
        else:
            answer = shortlist(ranked, itl_target, ttft_target, prices, show_all=show_all)
            report.print_recommendation(console, spec, answer, max_itl_ms, max_ttft_ms)
            if calibration is not None:
                print_recommend_calibration(console, calibration, ranked)
            for chained in recommended_chain_costs(loaded, spec, ranked, itl_target):
                print_chain_costs(console, chained)
        return
    specs = (
        [pick(loaded.profiles, model, loaded.path, "--model")]
        if model
        else list(loaded.profiles.values())
    )
    plans = [plan(spec, prices, calibration=loaded.calibration(spec)) for spec in specs]
    chains = [chain_costs(loaded, model_plan) for model_plan in plans]
    if as_json:
        document = {
            "stack": stack,
            "plans": [p.model_dump() for p in plans],
            "chains": [c.model_dump() for c in chains if c is not None],
        }
        print(json.dumps(document, indent=2))
    else:
        for spec, model_plan, chain in zip(specs, plans, chains, strict=True):
            report.print_plan(console, spec, model_plan)
            if chain is not None:
                print_chain_costs(console, chain)
    if not all(p.ok for p in plans):
        raise typer.Exit(1)


def init_command(
    model: Annotated[
        str,
        typer.Argument(
            help="A catalog model, or a Hugging Face repo (org/name): its config.json is read "
            "from --config, else from the Hub, unless --architecture names a catalog key."
        ),
    ],
    stack: Annotated[str, typer.Option(help="The stack to add the model to.")] = DEFAULT_STACK,
    architecture: Annotated[
        str | None, typer.Option(help="The catalog architecture of a Hugging Face repo.")
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            help="The repo's config.json, or a folder holding it and optionally "
            "model.safetensors.index.json. [default: fetched from the Hub with $HF_TOKEN]"
        ),
    ] = None,
    revision: Annotated[
        str | None, typer.Option(help="The Hub revision to read config.json from. [default: main]")
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
    from infra.cli.init import init_model

    written = init_model(
        model, stack, architecture=architecture, config=config, revision=revision,
        accelerator=accelerator, max_model_len=max_model_len, name=name,
    )  # fmt: skip
    report.print_init(console, written, stack)


def pools_command(
    stack: StackArg = DEFAULT_STACK,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """The cluster and node pools `pulumi up` builds for a stack, derived and checked offline.

    Exits 2, naming the file, the key and a fix, where the stack cannot be built.
    """
    platform = plan_platform(load_stack(stack))
    if not as_json:
        report_platform.print_platform(console, platform)
        return
    document = platform.model_dump(mode="json")
    for printed, pool in zip(document["gpu_pools"], platform.gpu_pools, strict=True):
        printed.update(
            compact=pool.compact,
            provisioning=pool.provisioning,
            node_selector=pool.node_selector,
            way=pool.way,
            quota=[{"metric": metric, "gpus": gpus} for metric, gpus in pool.quota],
        )
    print(json.dumps(document, indent=2))


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
        wanted = pick(loaded.profiles, model, loaded.path, "--model")
        chosen = {key: spec for key, spec in chosen.items() if spec is wanted}
    plans = {
        profile: plan(spec, loaded.config.prices, calibration=loaded.calibration(spec))
        for profile, spec in chosen.items()
    }
    # Every model's objects are built and checked before the first file is written: a refused
    # input leaves nothing behind.
    objects = {
        profile: stack_model_objects(loaded, profile, compile_model(loaded, spec, plans[profile]))
        for profile, spec in chosen.items()
        if plans[profile].ok
    }
    failed = False
    for profile, spec in chosen.items():
        model_plan = plans[profile]
        if not model_plan.ok:
            report.print_verdicts(errors, model_plan, prefix=f"{spec.name}: not rendered: ")
            failed = True
            continue
        for path in render_model(objects[profile], profile, loaded, out_dir):
            console.print(f"wrote {path}", highlight=False)
        if model_plan.calibration is not None:
            # The autoscaling knobs come from the plan's estimates (serving.compile.autoscaling).
            console.print(
                f"{spec.name}: autoscaling knobs from estimates "
                f"{model_plan.calibration.summary()}", highlight=False, soft_wrap=True,
            )  # fmt: skip
        report.print_verdicts(errors, model_plan, prefix=f"{spec.name}: ")
    if failed:
        raise typer.Exit(1)


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
    from infra.deploy.preview import preview, read_policy_config
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


# --- every command, registered in one place ---------------------------------------------------

# The planning and deployment commands, offline.
for name, command in (
    ("plan", plan_command),
    ("init", init_command),
    ("pools", pools_command),
    ("render", render_command),
    ("check-edge", check_edge_command),
    ("preview", preview_command),
    ("calibrate", bench_url.calibrate_command),
):
    app.command(name)(command)

# The local CPU data plane (serving.local): `servestack local serve|bench|capacity|faults|top`,
# and the forms they had before the group, `servestack serve --local` and the rest, kept as
# aliases.
local_app = typer.Typer(
    help="The local CPU data plane: real Ray Serve and its HAProxy on this machine.",
    no_args_is_help=True,
)
local_commands: tuple[tuple[str, Callable[..., None], dict[str, object]], ...] = (
    ("serve", cli_local.serve_command, {"local": True}),
    (
        "bench",
        cli_local.bench_command,
        {"local": True, "url": None, "sweep": False, "rate": None, "seed": 0, "max_seconds": None},
    ),
    ("capacity", cli_capacity.capacity_command, {"local": True}),
    ("faults", cli_faults.faults_command, {"local": True}),
    ("top", cli_local.top_command, {"local": True, "url": None}),
)
for name, local_command, fixed in local_commands:
    app.command(name)(local_command)
    local_app.command(name)(local_form(local_command, **fixed))
app.add_typer(local_app, name="local")


def main() -> None:
    try:
        app()
    except ServestackError as exc:
        errors.print(Text.assemble(("error: ", "bold red"), exc.render()), highlight=False)
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
