"""Human-readable tables for the CLI (rich). The JSON output carries the same figures."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

from infra.cli.report_measured import print_assumed_hit_rate, print_calibration
from serving.catalog import GIB, MACHINE_TYPES, PRICES_AS_OF, SPOT_PRICES_AS_OF
from serving.catalog.consumption import ConsumptionMode
from serving.plan.accuracy import MIN_MEASURING_RUNS, Phase, error_band
from serving.plan.memory import MemoryBreakdown
from serving.plan.planner import GroupPlan, Plan
from serving.recommend.shortlist import Shortlist
from serving.spec.loading import display_path
from serving.spec.profile import ModelSpec

if TYPE_CHECKING:  # the Pulumi SDKs come with it; only `preview` needs them
    from infra.cli.init import Initialized
    from infra.deploy.preview import PreviewResult


def _kv_per_token(mem: MemoryBreakdown) -> str:
    """Growing layers' bytes a token, plus what windows and state hold a sequence, if any."""
    text = f"{mem.kv_cache_bytes_per_token:,} B"
    if mem.kv_cache_bytes_per_sequence:
        text += f" + {mem.kv_cache_bytes_per_sequence / 2**20:,.0f} MiB / seq"
    return text


# The recommendation's $/M columns beside the list rate's, per way of obtaining nodes.
_MODE_COLUMNS: tuple[tuple[ConsumptionMode, str], ...] = (("spot", "Spot"), ("flex_start", "flex"))


def _sold_on_demand(machine_type: str) -> bool:
    return MACHINE_TYPES[machine_type].on_demand


def gib(value: int) -> str:
    return f"{value / GIB:,.1f} GiB"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms"


def _usd(value: float | None) -> str:
    return "—" if value is None else f"${value:,.2f}"


def _machine(name: str, gpus_per_node: int) -> str:
    text = f"{name} ({gpus_per_node} GPU/node)"
    return text if MACHINE_TYPES[name].on_demand else text + ", not sold on demand"


def _group_table(group: GroupPlan) -> Table:
    mem, where, est, cost = group.memory, group.placement, group.estimates, group.cost
    table = Table(show_header=False, box=None, padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    table.add_column(style="bold")
    table.add_column()
    rows = [
        (
            "layout",
            group.parallelism.label,
            "machine",
            _machine(where.machine_type, where.gpus_per_node),
        ),
        ("usable / GPU", gib(mem.usable_bytes), "GPUs / replica", str(where.gpus_per_replica)),
        ("weights / GPU", gib(mem.weights_bytes), "nodes / replica", str(where.nodes_per_replica)),
        (
            "activations",
            gib(mem.activation_bytes),
            "replicas / node",
            str(where.replicas_per_node or "—"),
        ),
        (
            "runtime",
            gib(mem.runtime_overhead_bytes),
            "replicas",
            f"{where.min_replicas}–{where.max_replicas}",
        ),
        (
            "KV cache / GPU",
            gib(mem.kv_cache_bytes),
            "nodes",
            f"{where.min_nodes}–{where.max_nodes}",
        ),
        ("KV / token", _kv_per_token(mem), "TTFT", _ms(est.ttft_s)),
        ("KV capacity", f"{mem.kv_capacity_tokens:,} tokens", "ITL (batch 1)", _ms(est.itl_s)),
        (
            "full-length seqs",
            f"{mem.max_concurrent_sequences:,}",
            f"ITL (batch {est.decode_batch})",
            _ms(est.itl_at_batch_s),
        ),
        (
            "$ / hour / replica",
            _usd(cost.price_per_hour_usd),
            "throughput",
            f"{est.output_tokens_per_s:,.0f} tok/s, {est.requests_per_s:,.2f} req/s",
        ),
        (
            "$ / hour at min",
            _usd(cost.min_fleet_per_hour_usd),
            "$ / M output tokens",
            _usd(cost.usd_per_million_output_tokens),
        ),
    ]
    if group.lora is not None:
        adapters = group.lora
        rows.insert(
            5,
            (
                "LoRA slots / GPU",
                gib(mem.lora_bytes),
                "adapters",
                f"{adapters.adapters} served, {adapters.adapters_on_gpu} per step (GPU), "
                f"{adapters.adapters_in_cpu} held (CPU)",
            ),
        )
        rows.insert(
            6,
            (
                "LoRA / worker (CPU)",
                gib(adapters.cpu_bytes_per_worker),
                "LoRA decode cost",
                f"+{_ms(adapters.decode_step_overhead_s)} / step (Punica), in the estimates",
            ),
        )
    for row in rows:
        table.add_row(*row)
    return table


def print_plan(console: Console, spec: ModelSpec, plan: Plan) -> None:
    status = "[green]fits[/]" if plan.ok else "[red]cannot work[/]"
    console.rule(
        f"[bold]{plan.model}[/]  {plan.architecture} · {plan.weights_dtype} · {plan.accelerator} · "
        f"max_model_len {plan.max_model_len:,} · {status}"
    )
    console.print(
        f"workload {spec.workload.input_tokens:,} in / {spec.workload.output_tokens:,} out tokens; "
        f"estimates from the planner's roofline model, prices approximate ({PRICES_AS_OF} list)",
        style="dim",
    )
    print_assumed_hit_rate(console, spec)
    for group in plan.groups:
        if len(plan.groups) > 1:
            console.print(f"[bold]{group.role}[/]")
        console.print(_group_table(group))
    calibrated = plan.calibration is not None and plan.calibration.applied
    print_error_bands(console, spec, plan.beyond_measured, calibrated)
    print_calibration(console, plan)
    print_verdicts(console, plan)
    console.print()


def print_error_bands(
    console: Console, spec: ModelSpec, beyond: list[str], calibrated: bool = False
) -> None:
    """What the planner's estimates for this kind of model measurably miss by, and what of
    this plan the measurement did not cover (`beyond`: Plan.beyond_measured), which a
    calibration record measured on the deployment itself (`calibrated`) has measured instead."""
    kind = "MoE" if spec.architecture.is_moe else "dense"
    console.print(
        f"measured error of the estimates for {kind} models, against held-back published vLLM "
        "runs:",
        style="dim",
    )
    shown_as: tuple[tuple[Phase, str], ...] = (
        ("decode", "ITL"), ("ttft", "TTFT"), ("saturation", "throughput"),
    )  # fmt: skip
    for phase, shown in shown_as:
        band = error_band(spec.architecture.is_moe, phase)
        console.print(f"  {shown}: {band.describe()}", style="dim", highlight=False)
    if beyond:
        console.print(
            f"  not covered: fewer than {MIN_MEASURING_RUNS} of those runs exercised "
            f"{'; '.join(beyond)}; "
            + (
                "the calibration of the deployed service below measured it"
                if calibrated
                else "the estimates extrapolate there"
            ),
            style="dim" if calibrated else "yellow",
            highlight=False,
        )


def print_verdicts(console: Console, plan: Plan, prefix: str = "") -> None:
    for verdict in plan.verdicts:
        colour = "red" if verdict.severity == "error" else "yellow"
        console.print(
            Text.assemble(
                prefix,
                (verdict.severity, colour),
                f" [{verdict.code}] {verdict.message}",
                (f" (profile field: {verdict.field})", "dim"),
            ),
            highlight=False,
        )


def print_recommendation(
    console: Console,
    spec: ModelSpec,
    answer: Shortlist,
    max_itl_ms: float,
    max_ttft_ms: float,
) -> None:
    """The answer first (the winner, why, what would change it), then the short list."""
    winner = answer.winner
    if winner is not None:
        console.print(
            Text.assemble(
                ("recommended: ", "bold"),
                (f"{winner.machine_type} ({winner.accelerator}), {winner.layout}", "bold green"),
                f" — {winner.gpus_per_replica} GPU(s) per replica, "
                f"{_usd(winner.usd_per_million_output_tokens)} per million output tokens, "
                f"TTFT {_ms(winner.ttft_s)}, ITL {_ms(winner.itl_at_batch_s)} at its batch",
            ),
            highlight=False,
        )
    else:
        console.print(Text("no recommendation", style="bold red"), highlight=False)
    if winner is not None and winner.beyond_measured:
        console.print(
            f"its estimates rest on what too few published runs measured "
            f"({'; '.join(winner.beyond_measured)}): its cost is an extrapolation; "
            "measure it (`servestack bench --url`) before buying on it",
            style="yellow",
            highlight=False,
        )
    console.print(Text.assemble(("why: ", "bold"), answer.why), highlight=False)
    if answer.changes:
        console.print(Text("what would change it:", style="bold"), highlight=False)
        for change in answer.changes:
            console.print(f"  - {change}", highlight=False)
    table = Table(
        title=(
            f"{spec.name}: machines and layouts by $ per million output tokens "
            f"(ITL ≤ {max_itl_ms:g} ms, TTFT ≤ {max_ttft_ms:g} ms; workload "
            f"{spec.workload.input_tokens}/{spec.workload.output_tokens} tokens)"
        )
    )
    # One cost column: the list rate's, then each mode some row has a price for (the catalog
    # lists no flex-start price, so today: Spot).
    modes = [
        mode
        for mode, _ in _MODE_COLUMNS
        if any(c.usd_per_million_by_mode.get(mode) for c in answer.shown)
    ]
    cost_header = "$/M tok" + "".join(f"/{name}" for mode, name in _MODE_COLUMNS if mode in modes)
    for column in ("#", "machine", "layout", "GPUs", cost_header, "TTFT", "ITL", "tok/s"):
        table.add_column(column, overflow="fold")
    table.add_column("why", overflow="fold")
    for candidate in answer.shown:
        reason = candidate.reason
        if candidate.refused_by is not None:
            reason = f"refused [{candidate.refused_by}]: {reason}"
        by_mode = candidate.usd_per_million_by_mode
        table.add_row(
            f"{candidate.rank}=" if candidate.tie else str(candidate.rank),
            candidate.machine_type
            + ("" if MACHINE_TYPES[candidate.machine_type].on_demand else "*"),
            candidate.layout,
            str(candidate.gpus_per_replica),
            _usd(candidate.usd_per_million_output_tokens)
            + "".join(f"/{_usd(by_mode.get(mode))}" for mode in modes),
            _ms(candidate.ttft_s),
            _ms(candidate.itl_at_batch_s),
            f"{candidate.output_tokens_per_s:,.0f}",
            Text(reason),  # a rule's code in brackets is text, not rich markup
            style="green" if candidate is winner else None,
        )
    if answer.shown:
        console.print(table)
    if answer.not_shown:
        console.print(answer.not_shown, style="dim", highlight=False)
    console.print(
        f"$/M tok: at the list rate machine types are ranked by ({PRICES_AS_OF} on-demand list; "
        "* marks a type GCP does not sell on demand, ranked at its SKUs' on-demand rate), which "
        "is also what a reservation's nodes bill at; /Spot: $/M at Spot prices of "
        f"{SPOT_PRICES_AS_OF}; flex-start has no published price in the catalog. "
        "servestack:prices overrides a type (<type>) or one way (<type>:<mode>).",
        style="dim",
        highlight=False,
    )
    band = error_band(spec.architecture.is_moe, "saturation")
    console.print(
        f"$/M tok follows the throughput estimate, whose measured error for "
        f"{'MoE' if spec.architecture.is_moe else 'dense'} models is {band.describe()}; "
        "rows marked '=' cost within that band of the winner: a tie.",
        style="dim",
        highlight=False,
    )


def print_init(console: Console, written: Initialized, stack: str) -> None:
    choice = written.choice
    console.print(f"wrote {display_path(written.profile)}", highlight=False)
    console.print(
        f"added {written.spec.name} to servestack:models in {display_path(written.stack)}",
        highlight=False,
    )
    console.print(
        f"  {choice.machine_type} ({choice.accelerator}), {choice.layout}, "
        f"{choice.gpus_per_replica} GPU(s) per replica, "
        f"{_usd(choice.usd_per_million_output_tokens)} per million output tokens"
        + ("" if choice.meets_targets else " — misses the default latency targets"),
        highlight=False,
    )
    if choice.beyond_measured:
        console.print(
            f"  beyond the measured runs: {'; '.join(choice.beyond_measured)} (an extrapolation)",
            style="yellow",
            highlight=False,
        )
    console.print(
        f"next: servestack plan {stack} --model {written.spec.name}; servestack preview {stack}",
        highlight=False,
    )


def print_preview(console: Console, result: PreviewResult, policies: int) -> None:
    """Resources grouped by the component that registered them, then every violation."""
    console.rule(
        f"[bold]servestack preview {result.stack}[/]  the Pulumi program under the mock engine · "
        f"{sum(1 for r in result.resources if r.custom)} resources · {policies} policies"
    )
    for component, resources in result.components().items():
        console.print(Text(component, style="bold"))
        for resource in resources:
            console.print(Text.assemble("  ", (resource.type, "dim"), "  ", resource.name))
    console.print()
    if not result.violations:
        console.print("[green]no policy violations[/]")
        return
    for violation in result.violations:
        colour = "red" if violation.enforcement == "mandatory" else "yellow"
        where = violation.resource.rsplit("::", 1)[-1]
        prefix = "" if violation.message.startswith(where) else f"{where}: "
        console.print(
            Text.assemble(
                (violation.enforcement, colour), f" [{violation.policy}] {prefix}",
                violation.message,
            ),
            highlight=False,
        )  # fmt: skip
        console.print(Text(f"  fix: {violation.remediation}", style="dim"), highlight=False)
    mandatory = len(result.mandatory)
    console.print(
        f"{mandatory} mandatory, {len(result.violations) - mandatory} advisory violation(s)"
    )
