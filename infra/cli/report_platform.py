"""The platform a stack provisions (`servestack plan STACK`): the cluster, its node pools and
capacity chains, the quota they draw on, and every kind of pod against its node."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from infra.cli.report import gib
from infra.cli.report_chains import print_quota
from infra.platform.plan import PlatformPlan


def print_platform(console: Console, platform: PlatformPlan) -> None:
    cluster = platform.cluster
    kind = "zonal" if cluster.cluster_zone else "regional"
    networks = ", ".join(map(str, cluster.master_authorized_networks)) or "none (API closed)"
    console.rule(
        f"[bold]{platform.stack}[/]  {cluster.project} · {kind} cluster in {cluster.location}"
    )
    console.print(
        f"release channel {cluster.release_channel} · private nodes · Workload Identity · "
        f"control plane reachable from: {networks}"
    )
    table = Table()
    for column in ("pool", "machine", "GPUs", "nodes", "placement"):
        table.add_column(column, no_wrap=True)
    for column in ("zones", "obtained", "serves"):
        table.add_column(column, overflow="fold")
    system = platform.system_pool
    table.add_row(
        "system", system.machine_type, "—", f"{system.min_nodes}–{system.max_nodes}", "—",
        "the cluster's", "on-demand", "CPU pods",
    )  # fmt: skip
    for pool in platform.gpu_pools:
        machine = pool.machine
        obtained = pool.provisioning
        if pool.reservation_affinity != "none":
            obtained += f", reservation: {pool.reservation_affinity}"
        if pool.chain_step is not None:
            obtained = pool.way
        table.add_row(
            "gpu" if pool.chain_step is None else f"gpu step {pool.chain_step + 1}",
            pool.machine_type,
            f"{machine.gpus_per_node}× {machine.accelerator}",
            f"{pool.min_nodes}–{pool.max_nodes}",
            "compact" if pool.compact else "spread",
            ", ".join(pool.zones),
            obtained,
            ", ".join(pool.models),
        )
    console.print(table)
    print_chains(console, platform)
    for pool in platform.gpu_pools:
        if pool.chain_step:
            continue  # one line per chain: its steps share the bounds
        reserved = f", reservations hold {pool.reserved_nodes}" if pool.reserved_nodes else ""
        console.print(
            f"{pool.machine_type}: {pool.max_nodes} nodes at most = "
            f"{pool.max_nodes - pool.upgrade_room_nodes} at max_replicas + "
            f"{pool.upgrade_room_nodes} for a RayService upgrade's new cluster{reserved}"
        )
    print_quota(console, platform)
    print_pod_fits(console, platform)


def print_chains(console: Console, platform: PlatformPlan) -> None:
    """Each capacity chain: its ComputeClass and its steps in priority order."""
    chains: dict[str, list[str]] = {}
    for pool in platform.gpu_pools:
        if pool.compute_class is not None:
            chains.setdefault(f"{pool.chain_of} chain (ComputeClass {pool.compute_class})", [])
            chains[f"{pool.chain_of} chain (ComputeClass {pool.compute_class})"].append(
                f"{(pool.chain_step or 0) + 1}. {pool.way} on {pool.machine_type}"
            )
    for title, steps in chains.items():
        console.print(f"{title}: {' → '.join(steps)}")


def print_pod_fits(console: Console, platform: PlatformPlan) -> None:
    """Every kind of pod against what one node of its pool holds for pods."""
    table = Table(title="pods against their nodes (requests / room per node)")
    for column in ("pod", "pool", "machine", "count", "CPU", "memory", "fits"):
        table.add_column(column, no_wrap=column != "pod")
    for pod in platform.pods:
        table.add_row(
            pod.pod, pod.pool, pod.machine_type, str(pod.count),
            f"{pod.cpus:g} / {pod.node_cpus:g}",
            f"{gib(pod.memory_bytes)} / {gib(pod.node_memory_bytes)}",
            "yes" if pod.fits else "[red]NO[/]",
        )  # fmt: skip
    console.print(table)
