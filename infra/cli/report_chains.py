"""The capacity chain a model is served through, step by step, with what each step costs
(`servestack plan`), and the quota each GPU pool's way of obtaining nodes needs (`servestack
pools`); the JSON output carries the same figures."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from infra.platform.chain_costs import ChainCost
from infra.platform.plan import PlatformPlan
from serving.catalog import PRICES_AS_OF, SPOT_PRICES_AS_OF


def _usd(value: float | None) -> str:
    return "—" if value is None else f"${value:,.2f}"


def print_chain_costs(console: Console, chain: ChainCost) -> None:
    table = Table(
        title=f"{chain.model} through the {chain.chain_of} capacity chain: $ per million output "
        "tokens at each step"
    )
    for column in ("step", "way", "machine", "$ / node-hour", "$ / M output tokens", "note"):
        table.add_column(column, overflow="fold")
    for step in chain.steps:
        worst = step.step == chain.worst_step
        table.add_row(
            str(step.step + 1),
            step.mode.replace("_", "-"),
            step.machine_type,
            _usd(step.node_price_per_hour_usd),
            _usd(step.usd_per_million_output_tokens) + (" (worst)" if worst else ""),
            step.note or "",
        )
    console.print(table)
    if chain.worst_step is not None:
        unpriced = ", ".join(str(s + 1) for s in chain.unpriced_steps)
        console.print(
            f"worst step: {chain.worst_step + 1} "
            f"({chain.steps[chain.worst_step].mode.replace('_', '-')}), "
            f"{_usd(chain.worst_usd_per_million_output_tokens)} per million output tokens"
            + (f"; step(s) {unpriced} have no known price and are not counted" if unpriced else ""),
            highlight=False,
        )
    console.print(
        f"prices: on demand and reservations at the {PRICES_AS_OF} list rate, Spot as of "
        f"{SPOT_PRICES_AS_OF}, each overridable in servestack:prices",
        style="dim",
        highlight=False,
    )


def print_quota(console: Console, platform: PlatformPlan) -> None:
    """Per GPU pool (each chain step is one), the quota metrics its nodes count against and the
    GPUs it may hold at its maximum, to check before `pulumi up`."""
    region = platform.cluster.region
    console.print(f"GPU quota to check in {region} before `pulumi up` (GPUs at each pool's max):")
    for pool in platform.gpu_pools:
        where = (
            f"{pool.chain_of} step {pool.chain_step + 1}" if pool.chain_step is not None else "gpu"
        )
        (regional, gpus), (global_metric, _) = pool.quota
        console.print(
            f"  {where}, {pool.way} on {pool.machine_type}: {regional} >= {gpus} "
            f"(and the global {global_metric})",
            highlight=False,
        )
