"""The capacity planner: does a spec fit, on how many GPUs and nodes, how fast, at what cost.

A plan puts together what `serving.memory` (the per-GPU memory breakdown) and `serving.speed`
(latency and throughput estimates) say about each replica group, where the replicas land
(machine type, nodes) and what they cost, and the verdicts on the layout. The memory and speed
names stay importable from here.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from serving import catalog
from serving.accuracy import error_band
from serving.catalog import GIB, MachineType
from serving.memory import (
    MemoryBreakdown,
    activation_bytes_per_gpu,
    kv_bytes_per_token,
    kv_bytes_per_token_per_gpu,
    memory,
    runtime_overhead_bytes,
    weight_bytes,
    weight_bytes_per_gpu,
)
from serving.replicas import Role, replica_groups
from serving.spec import Autoscaling, ModelSpec, Parallelism
from serving.speed import (
    ALLTOALL_LATENCY_S,
    Estimates,
    alltoall_bytes_per_rank,
    alltoall_s,
    decode_step_s,
    estimates,
    prefill_compute_s,
    prefill_s,
    saturated_batch,
    ttft_s,
)

__all__ = [
    "ALLTOALL_LATENCY_S",
    "GIB",
    "Estimates",
    "MemoryBreakdown",
    "activation_bytes_per_gpu",
    "alltoall_bytes_per_rank",
    "alltoall_s",
    "decode_step_s",
    "estimates",
    "kv_bytes_per_token",
    "kv_bytes_per_token_per_gpu",
    "memory",
    "prefill_compute_s",
    "prefill_s",
    "runtime_overhead_bytes",
    "saturated_batch",
    "ttft_s",
    "weight_bytes",
    "weight_bytes_per_gpu",
]

MAX_PIPELINE_STAGES = 8  # beyond 8 nodes per replica, serve a smaller model

Severity = Literal["error", "warning"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Placement(_Frozen):
    machine_type: str
    gke_accelerator: str
    gpus_per_node: int
    gpus_per_replica: int
    nodes_per_replica: int
    replicas_per_node: int = Field(description="0 when one replica spans several nodes.")
    spans_nodes: bool
    expert_parallel_size: int
    min_replicas: int
    max_replicas: int
    min_nodes: int
    max_nodes: int


class Cost(_Frozen):
    price_per_hour_usd: float = Field(description="One replica's share of its nodes.")
    min_fleet_per_hour_usd: float = Field(description="All nodes at min replicas.")
    usd_per_million_output_tokens: float | None = Field(
        description="At the throughput point; None where the replica cannot run."
    )


class GroupPlan(_Frozen):
    """One group of identical replicas: the server, or the prefill or decode side."""

    role: Role
    parallelism: Parallelism
    memory: MemoryBreakdown
    placement: Placement
    estimates: Estimates
    cost: Cost


class Verdict(_Frozen):
    code: str = Field(description="Stable identifier, e.g. 'tp-crosses-node'.")
    severity: Severity = Field(
        description="error: cannot work; warning: works but wastes or misleads."
    )
    role: Role
    message: str
    suggestion: Parallelism | None = Field(
        default=None, description="The smallest layout that would work, where one exists."
    )


class Plan(_Frozen):
    model: str
    architecture: str
    accelerator: str
    weights_dtype: str
    max_model_len: int
    groups: list[GroupPlan]
    verdicts: list[Verdict]
    ttft_s: float = Field(description="Workload's time to first token (prefill side for P/D).")
    itl_s: float = Field(description="Inter-token latency at batch 1 (decode side for P/D).")
    requests_per_s: float = Field(description="At min replicas (at least one of each group).")
    output_tokens_per_s: float
    usd_per_million_output_tokens: float | None
    measured_error: dict[str, float] = Field(
        description="The planner's measured error for this kind of model, by estimate "
        "(decode, ttft, saturation): |estimate / published - 1| that 80% of held-back published "
        "vLLM runs stay within (serving.accuracy)."
    )

    @property
    def ok(self) -> bool:
        return not any(v.severity == "error" for v in self.verdicts)

    @property
    def total_gpus_min(self) -> int:
        return sum(g.placement.gpus_per_replica * g.placement.min_replicas for g in self.groups)

    def group(self, role: Role) -> GroupPlan:
        return next(g for g in self.groups if g.role == role)


# --- placement ----------------------------------------------------------------------------


def choose_machine(spec: ModelSpec, gpus_per_replica: int) -> MachineType:
    """The profile's machine type, else the cheapest node that holds a whole replica, else the
    largest node (the replica then spans nodes, a whole node per pod)."""
    if spec.machine_type:
        return spec.machine
    machines = catalog.machines_for(spec.accelerator)
    holding = [m for m in machines if m.gpus_per_node >= gpus_per_replica]
    if holding:
        return min(holding, key=lambda m: (m.gpus_per_node, m.price_per_hour_usd))
    largest = max(m.gpus_per_node for m in machines)
    return min(
        (m for m in machines if m.gpus_per_node == largest), key=lambda m: m.price_per_hour_usd
    )


def placement(machine: MachineType, layout: Parallelism, autoscaling: Autoscaling) -> Placement:
    """Where a group's replicas land on nodes of the machine `choose_machine` picked for it."""
    gpus = layout.gpus_per_replica
    nodes_per_replica = math.ceil(gpus / machine.gpus_per_node)
    replicas_per_node = machine.gpus_per_node // gpus if nodes_per_replica == 1 else 0

    def nodes(replicas: int) -> int:
        if replicas_per_node:
            return math.ceil(replicas / replicas_per_node)
        return replicas * nodes_per_replica

    return Placement(
        machine_type=machine.name,
        gke_accelerator=machine.gke_accelerator,
        gpus_per_node=machine.gpus_per_node,
        gpus_per_replica=gpus,
        nodes_per_replica=nodes_per_replica,
        replicas_per_node=replicas_per_node,
        spans_nodes=nodes_per_replica > 1,
        expert_parallel_size=layout.expert_parallel_size,
        min_replicas=autoscaling.min_replicas,
        max_replicas=autoscaling.max_replicas,
        min_nodes=nodes(autoscaling.min_replicas),
        max_nodes=nodes(autoscaling.max_replicas),
    )


def nodes_for(placements: list[Placement], bound: Literal["min", "max"]) -> int:
    """Nodes of one machine type that hold every replica of these groups at once (a P/D pair's
    two sides, say). Replicas whose GPU count divides the node share nodes without gaps: Ray
    places each replica's bundles on any node with free GPUs. Replicas that span nodes, or leave
    a node's GPUs in an unusable remainder, take their nodes alone."""
    if not placements:
        return 0
    per_node = placements[0].gpus_per_node
    assert all(p.gpus_per_node == per_node for p in placements), "one machine type at a time"

    def replicas(p: Placement) -> int:
        return p.min_replicas if bound == "min" else p.max_replicas

    sharing = [p for p in placements if p.replicas_per_node and per_node % p.gpus_per_replica == 0]
    alone = [p for p in placements if p not in sharing]
    shared_gpus = sum(p.gpus_per_replica * replicas(p) for p in sharing)
    return math.ceil(shared_gpus / per_node) + sum(
        p.min_nodes if bound == "min" else p.max_nodes for p in alone
    )


# --- verdicts -----------------------------------------------------------------------------


def _describe(layout: Parallelism) -> str:
    parts = [f"tensor={layout.tensor}"]
    if layout.pipeline > 1:
        parts.append(f"pipeline={layout.pipeline}")
    if layout.data > 1:
        parts.append(f"data={layout.data}")
    if layout.expert:
        parts.append("expert=true")
    return " ".join(parts)


def valid_tensor_sizes(spec: ModelSpec, limit: int) -> list[int]:
    """TP sizes vLLM accepts for this model: they divide the attention heads, and divide the
    KV heads or are a multiple of them (KV heads are then replicated)."""
    arch = spec.architecture
    return [
        tp
        for tp in range(1, limit + 1)
        if arch.num_attention_heads % tp == 0
        and (arch.num_kv_heads % tp == 0 or tp % arch.num_kv_heads == 0)
    ]


def _largest_node(spec: ModelSpec) -> int:
    if spec.machine_type:
        return spec.machine.gpus_per_node
    return max(m.gpus_per_node for m in catalog.machines_for(spec.accelerator))


def _candidate_layouts(spec: ModelSpec, layout: Parallelism) -> Iterator[Parallelism]:
    """Layouts vLLM serves well, smallest first: tensor parallelism inside one node, and
    pipeline stages of a whole node each once a replica needs more than a node. Data and expert
    parallelism stay as the profile set them."""
    per_node = _largest_node(spec)
    tensor_sizes = valid_tensor_sizes(spec, per_node)
    shapes = [(tp, 1) for tp in tensor_sizes]
    if per_node in tensor_sizes:
        shapes += [(per_node, pp) for pp in range(2, MAX_PIPELINE_STAGES + 1)]
    for tp, pp in sorted(shapes, key=lambda shape: shape[0] * shape[1]):
        yield Parallelism(tensor=tp, pipeline=pp, data=layout.data, expert=layout.expert)


def _experts_shard(spec: ModelSpec, layout: Parallelism) -> bool:
    """Expert parallelism only on a MoE model, with an EP size that divides its experts."""
    arch = spec.architecture
    if not layout.expert:
        return True
    return arch.is_moe and arch.num_experts % layout.expert_parallel_size == 0


def smallest_layout(spec: ModelSpec, layout: Parallelism) -> Parallelism | None:
    """The fewest GPUs on which the model fits, among the layouts vLLM serves well: every
    suggestion a verdict makes is this layout, which no topology rule refuses (a valid TP inside
    one node, pipeline stages only once no single node holds the model, experts that divide)."""
    for candidate in _candidate_layouts(spec, layout):
        if _experts_shard(spec, candidate) and memory(spec, candidate).fits:
            return candidate
    return None


# Placement strategies that scatter a group over as many nodes as they can.
_SPREADING = ("SPREAD", "STRICT_SPREAD")


def verdicts(
    spec: ModelSpec,
    role: Role,
    layout: Parallelism,
    mem: MemoryBreakdown,
    *,
    gpus_per_node: int | None = None,
    strategy: str | None = None,
) -> list[Verdict]:
    """Every rule a layout must pass, the one set the planner and the policy pack both ask.

    `gpus_per_node` is the GPUs of one worker pod (one node); by default the node the planner
    would choose. `strategy` is the Ray placement strategy the deployment uses; by default the
    profile's, where it sets one (the compiler's own choice passes by construction)."""
    arch, gpu = spec.architecture, spec.gpu
    found: list[Verdict] = []

    def say(
        code: str, severity: Severity, message: str, suggestion: Parallelism | None = None
    ) -> None:
        found.append(
            Verdict(code=code, severity=severity, role=role, message=message, suggestion=suggestion)
        )

    smallest = smallest_layout(spec, layout)
    per_node = gpus_per_node or _largest_node(spec)
    use = f"use {_describe(smallest)}" if smallest else f"no layout on {gpu.key} nodes holds it"
    if layout.tensor > per_node:
        machine = choose_machine(spec, layout.gpus_per_replica)
        say(
            "tp-crosses-node", "error",
            f"tensor={layout.tensor} needs {layout.tensor} GPUs on one node; {machine.name} has "
            f"{per_node} — {use}",
            smallest,
        )  # fmt: skip
    tensor_sizes = valid_tensor_sizes(spec, max(layout.tensor, 1))
    if layout.tensor not in tensor_sizes:
        say(
            "tp-heads", "error",
            f"tensor={layout.tensor} does not divide {arch.key}'s {arch.num_attention_heads} "
            f"attention heads and {arch.num_kv_heads} KV heads — {use}",
            smallest,
        )  # fmt: skip
    if not mem.fits:
        needed = mem.weights_bytes + mem.activation_bytes + mem.runtime_overhead_bytes
        needed += spec.max_model_len * mem.kv_cache_bytes_per_token_per_gpu
        say(
            "does-not-fit", "error",
            f"{arch.key} ({spec.weights_dtype}) with {_describe(layout)} needs "
            f"{needed / GIB:.1f} GiB per GPU for weights and one {spec.max_model_len:,}-token "
            f"sequence; {gpu.key} offers {mem.usable_bytes / GIB:.1f} GiB at "
            f"gpu_memory_utilization {spec.gpu_memory_utilization} — {use}",
            smallest,
        )  # fmt: skip
    elif (
        smallest is not None
        and smallest.gpus_per_replica < layout.gpus_per_replica
        and layout.gpus_per_replica <= per_node
    ):
        say(
            "over-sharded", "warning",
            f"{arch.key} fits on {smallest.gpus_per_replica} GPU(s) with {_describe(smallest)}; "
            f"{_describe(layout)} uses {layout.gpus_per_replica} — more replicas of the smaller "
            "layout serve more requests for the same GPUs",
            smallest,
        )  # fmt: skip
    if (
        layout.gpus_per_replica > per_node
        and smallest is not None
        and smallest.gpus_per_replica <= per_node
    ):
        say(
            "needless-span", "error",
            f"{_describe(layout)} spans {-(-layout.gpus_per_replica // per_node)} nodes of "
            f"{per_node} GPUs, but {_describe(smallest)} holds {arch.key} on "
            f"{smallest.gpus_per_replica} GPU(s) of one node — crossing nodes trades NVLink for "
            "the network",
            smallest,
        )  # fmt: skip
    chosen = strategy or (spec.placement if spec.placement != "auto" else None)
    if chosen is not None and layout.model_parallel_size > 1:
        inside = layout.model_parallel_size <= per_node
        if inside and chosen != "STRICT_PACK":
            say(
                "placement-strategy", "error",
                f"placement strategy {chosen} lets the {layout.model_parallel_size} "
                "tensor/pipeline ranks land on different nodes; a group that fits one node must "
                "be STRICT_PACK — set placement: auto",
            )  # fmt: skip
        elif not inside and chosen in _SPREADING:
            say(
                "placement-strategy", "error",
                f"placement strategy {chosen} scatters the ranks over as many nodes as it can; "
                "pipeline stages across nodes need PACK — set placement: auto",
            )  # fmt: skip
    if layout.expert and not arch.is_moe:
        fix = smallest_layout(spec, layout.model_copy(update={"expert": False, "data": 1}))
        say(
            "ep-on-dense", "error",
            f"expert parallelism needs a mixture-of-experts model; {arch.key} is dense — set "
            "parallelism.expert: false (and scale with replicas instead of data)",
            fix,
        )  # fmt: skip
    elif layout.expert and arch.num_experts % layout.expert_parallel_size:
        sizes = [d for d in (1, 2, 4, 8, 16, 32, 64) if arch.num_experts % (d * layout.tensor) == 0]
        data = max((d for d in sizes if d <= max(layout.data, 1)), default=1)
        fix = smallest_layout(spec, layout.model_copy(update={"data": data}))
        say(
            "ep-size-indivisible", "error",
            f"expert-parallel size {layout.expert_parallel_size} (data {layout.data} x tensor "
            f"{layout.tensor}) does not divide {arch.key}'s {arch.num_experts} experts — "
            + (f"use {_describe(fix)}" if fix else "no expert-parallel layout holds it"),
            fix,
        )  # fmt: skip
    if spec.weights_dtype == "fp8" and not gpu.has_fp8_math:
        say(
            "fp8-weight-only", "warning",
            f"{gpu.key} has no FP8 tensor cores (compute capability "
            f"{'.'.join(map(str, gpu.compute_capability))} < 8.9): FP8 weights run weight-only "
            "(W8A16), saving memory but not compute — use "
            f"{' / '.join(catalog.FP8_ACCELERATORS)} for FP8 math",
        )  # fmt: skip
    return found


# --- the plan -----------------------------------------------------------------------------


def plan(
    spec: ModelSpec,
    prices: Mapping[str, float] | None = None,
    itl_target_s: float | None = None,
) -> Plan:
    """Plan a spec. `prices` overrides catalog prices per machine type (USD per node-hour)."""
    groups: list[GroupPlan] = []
    found: list[Verdict] = []
    for group in replica_groups(spec):
        role, layout = group.role, group.parallelism
        mem = memory(spec, layout)
        machine = choose_machine(spec, layout.gpus_per_replica)
        where = placement(machine, layout, group.autoscaling)
        # Throughput at the largest batch within the profile's inter-token target, unless the
        # caller asks about another target (the recommender's).
        target_s = spec.latency.itl_ms / 1e3 if itl_target_s is None else itl_target_s
        est = estimates(spec, machine, role, layout, mem, target_s)
        node_price = (prices or {}).get(machine.name, machine.price_per_hour_usd)
        replica_price = (
            node_price / where.replicas_per_node
            if where.replicas_per_node
            else node_price * where.nodes_per_replica
        )
        tokens_per_hour = est.output_tokens_per_s * 3600
        groups.append(
            GroupPlan(
                role=role,
                parallelism=layout,
                memory=mem,
                placement=where,
                estimates=est,
                cost=Cost(
                    price_per_hour_usd=replica_price,
                    min_fleet_per_hour_usd=node_price * where.min_nodes,
                    usd_per_million_output_tokens=(
                        replica_price / tokens_per_hour * 1e6 if tokens_per_hour else None
                    ),
                ),
            )
        )
        found.extend(verdicts(spec, role, layout, mem))

    # A serving unit is one replica of each group: P/D pairs a prefill and a decode replica.
    requests_per_s = min(g.estimates.requests_per_s for g in groups)
    output_tokens_per_s = requests_per_s * spec.workload.output_tokens
    unit_price = sum(g.cost.price_per_hour_usd for g in groups)
    first, last = groups[0], groups[-1]
    return Plan(
        model=spec.name,
        architecture=spec.architecture.key,
        accelerator=spec.accelerator,
        weights_dtype=spec.weights_dtype,
        max_model_len=spec.max_model_len,
        groups=groups,
        verdicts=found,
        # P/D: the decode side makes the first token once the prompt's KV cache has arrived.
        ttft_s=first.estimates.ttft_s + (last.estimates.itl_s if first is not last else 0.0),
        itl_s=last.estimates.itl_s,
        requests_per_s=requests_per_s,
        output_tokens_per_s=output_tokens_per_s,
        usd_per_million_output_tokens=(
            unit_price / (output_tokens_per_s * 3600) * 1e6 if output_tokens_per_s else None
        ),
        measured_error={
            phase: error_band(spec.architecture.is_moe, phase).band
            for phase in ("decode", "ttft", "saturation")
        },
    )
