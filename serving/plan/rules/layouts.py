"""The layouts vLLM serves well and the smallest of them on which a model fits: the one layout
every verdict's suggestion names (`smallest_layout`)."""

from __future__ import annotations

from collections.abc import Iterator

from serving.plan.memory import memory
from serving.plan.placement import largest_node
from serving.spec.parts import Parallelism
from serving.spec.profile import ModelSpec

MAX_PIPELINE_STAGES = 8  # beyond 8 nodes per replica, serve a smaller model


def describe(layout: Parallelism) -> str:
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


def experts_shard(spec: ModelSpec, layout: Parallelism) -> bool:
    """Expert parallelism only on a MoE model, with an EP size that divides its experts."""
    arch = spec.architecture
    if not layout.expert:
        return True
    return arch.is_moe and arch.num_experts % layout.expert_parallel_size == 0


def mlp_shards(spec: ModelSpec, layout: Parallelism) -> list[tuple[str, int, int]]:
    """(what, width, ways split) of each MLP width tensor parallelism splits: a dense model's
    MLP; a MoE model's experts (whole on their rank under expert parallelism, whose MoE layers
    vLLM runs at a tensor size of 1), its shared experts (DeepSeek's and GLM's are one MLP of
    n_shared_experts expert widths) and its dense layers' MLP."""
    arch, tensor = spec.architecture, layout.tensor
    if not arch.is_moe:
        return [("MLP", arch.intermediate_size, tensor)]
    shards = [("expert", arch.intermediate_size, 1 if layout.expert else tensor)]
    if arch.num_shared_experts:
        shards.append(("shared expert", arch.intermediate_size * arch.num_shared_experts, tensor))
    if arch.dense_intermediate_size:
        shards.append(("dense layers' MLP", arch.dense_intermediate_size, tensor))
    return shards


def split_block(spec: ModelSpec, layout: Parallelism) -> tuple[str, int, int] | None:
    """The first MLP width (mlp_shards) whose shard is not a whole number of the FP8 weights'
    [rows, columns] blocks (spec.weight_block), which vLLM 0.22 refuses when it builds the
    layer: a MoE layer's gate/up shard must be whole blocks of rows, and under a tensor size
    above 1 whole blocks of columns too (Fp8MoEMethod.create_weights, quantization/fp8.py); a
    linear layer's likewise (validate_fp8_block_shape, quantization/utils/fp8_utils.py: merged
    gate/up outputs by rows, the row-parallel down projection by columns). None where all are
    whole, or the weights are not scaled in blocks."""
    if spec.weight_block is None:
        return None
    rows, columns = spec.weight_block
    for what, width, ways in mlp_shards(spec, layout):
        part, rest = divmod(width, ways)
        if rest or part % rows or (ways > 1 and part % columns):
            return what, width, ways
    return None


def smallest_layout(spec: ModelSpec, layout: Parallelism) -> Parallelism | None:
    """The fewest GPUs on which the model fits, among the layouts vLLM serves well: every
    suggestion a verdict makes is this layout, which no topology rule refuses (a valid TP inside
    one node, pipeline stages only once no single node holds the model, experts that divide,
    FP8 blocks whole on every rank)."""
    for candidate in _candidate_layouts(spec, layout):
        whole = experts_shard(spec, candidate) and split_block(spec, candidate) is None
        if whole and memory(spec, candidate).fits:
            return candidate
    return None
