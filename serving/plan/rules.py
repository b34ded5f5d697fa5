"""The rules a layout must pass (`verdicts`), the one set the planner and the policy pack both
ask, and the smallest layout every suggestion names (`smallest_layout`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from pydantic import Field

from serving import catalog
from serving.catalog import GIB
from serving.frozen import Frozen
from serving.plan.memory import MemoryBreakdown, memory
from serving.plan.placement import choose_machine, largest_node
from serving.plan.replicas import Role
from serving.spec.parts import Parallelism
from serving.spec.profile import ModelSpec

MAX_PIPELINE_STAGES = 8  # beyond 8 nodes per replica, serve a smaller model

Severity = Literal["error", "warning"]


class Verdict(Frozen):
    code: str = Field(description="Stable identifier, e.g. 'tp-crosses-node'.")
    severity: Severity = Field(
        description="error: cannot work; warning: works but wastes or misleads."
    )
    role: Role
    message: str
    suggestion: Parallelism | None = Field(
        default=None, description="The smallest layout that would work, where one exists."
    )


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


def _candidate_layouts(spec: ModelSpec, layout: Parallelism) -> Iterator[Parallelism]:
    """Layouts vLLM serves well, smallest first: tensor parallelism inside one node, and
    pipeline stages of a whole node each once a replica needs more than a node. Data and expert
    parallelism stay as the profile set them."""
    per_node = largest_node(spec)
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
    per_node = gpus_per_node or largest_node(spec)
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
