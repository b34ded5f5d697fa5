"""The capacity planner: does a spec fit, on how many GPUs and nodes, how fast, at what cost.

Memory follows how vLLM lays out a GPU: `gpu_memory_utilization` of the board is usable; the
weights shard take their part, the activation peak of one `max_num_batched_tokens` step and a
fixed runtime overhead take theirs, and the rest is KV cache.

Speed follows a roofline: a decode step streams this GPU's weights and its sequences' KV cache
from HBM, or is bound by tensor-core math at large batches, whichever is slower, plus the
tensor-parallel all-reduces, the expert-parallel all-to-alls and a fixed step overhead. Prefill
is bound by math. The efficiency constants below were fitted once to the published measurements
in `tests/serving/test_published_measurements.py` (NVIDIA NIM, vLLM's nightly benchmark,
TensorRT-LLM); estimates land within 25% of them. They are estimates, not promises: a large MoE at
batch 1 is slower than any roofline says.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from serving import catalog
from serving.catalog import BYTES_PER_WEIGHT, GIB, MachineType
from serving.spec import Autoscaling, ModelSpec, Parallelism

# Per-GPU memory outside weights, KV cache and activations: the CUDA context (~0.5 GiB), NCCL
# buffers (~0.5 GiB) and CUDA-graph pools (~1 GiB), as vLLM's startup log reports them on H100.
RUNTIME_OVERHEAD_BYTES = 2 * GIB
# Fraction of peak HBM bandwidth a decode step achieves; fitted to the published decode
# latencies (vLLM nightly, NIM), which sit at 1.6-2.2x the pure weight-streaming bound.
HBM_EFFICIENCY = 0.7
# Fraction of peak tensor-core FLOP/s reached by prefill and by compute-bound decode.
PREFILL_MFU = 0.6
DECODE_MFU = 0.45
# Fixed cost of one engine step (scheduling, sampling, launch) with CUDA graphs on.
STEP_OVERHEAD_S = 1.0e-3
# One small-message all-reduce (decode) between GPUs of one node, launch included.
ALLREDUCE_LATENCY_S = 18e-6
# One expert-parallel dispatch or combine (all-to-all), launch included.
ALLTOALL_LATENCY_S = 40e-6
# One pipeline-stage hand-off.
P2P_LATENCY_S = 30e-6
ACTIVATION_BYTES = 2  # BF16 activations
LOGIT_BYTES = 4  # vLLM computes logits in FP32
MAX_PIPELINE_STAGES = 8  # beyond 8 nodes per replica, serve a smaller model

Severity = Literal["error", "warning"]
Role = Literal["server", "prefill", "decode"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class MemoryBreakdown(_Frozen):
    """Per-GPU memory of one replica, in bytes."""

    usable_bytes: int = Field(description="gpu_memory_utilization x the board's memory.")
    weights_bytes: int = Field(description="This GPU's shard of the weights.")
    activation_bytes: int = Field(
        description="Peak activations of one max_num_batched_tokens step."
    )
    runtime_overhead_bytes: int
    kv_cache_bytes: int = Field(description="What is left for KV cache (negative: does not fit).")
    kv_cache_bytes_per_token: int = Field(description="KV cache of one token, whole model.")
    kv_cache_bytes_per_token_per_gpu: int
    kv_capacity_tokens: int = Field(description="Tokens of KV cache one replica holds.")
    max_concurrent_sequences: int = Field(description="Sequences of max_model_len held at once.")
    fits: bool = Field(description="Weights plus KV for one max_model_len sequence fit.")


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


class Estimates(_Frozen):
    """Roofline estimates for one replica (see the module docstring)."""

    prefill_s: float = Field(description="Prefill of the workload's input at batch 1.")
    ttft_s: float = Field(description="Time to first token at batch 1.")
    itl_s: float = Field(description="Inter-token latency at batch 1.")
    decode_batch: int = Field(description="Sequences decoded per step at the throughput point.")
    itl_at_batch_s: float = Field(description="Inter-token latency at that batch.")
    requests_per_s: float
    output_tokens_per_s: float


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

    @property
    def ok(self) -> bool:
        return not any(v.severity == "error" for v in self.verdicts)

    @property
    def total_gpus_min(self) -> int:
        return sum(g.placement.gpus_per_replica * g.placement.min_replicas for g in self.groups)

    def group(self, role: Role) -> GroupPlan:
        return next(g for g in self.groups if g.role == role)


# --- memory -------------------------------------------------------------------------------


def weight_bytes(spec: ModelSpec) -> tuple[float, float]:
    """(non-expert, expert) weight bytes of the whole model as served.

    Embeddings and the LM head stay BF16 under FP8 quantization, as in vLLM and published FP8
    checkpoints.
    """
    arch = spec.architecture
    embeddings = arch.embedding_params * BYTES_PER_WEIGHT["bf16"]
    experts = arch.expert_params * BYTES_PER_WEIGHT[spec.expert_weights_dtype]
    rest = arch.total_params - arch.embedding_params - arch.expert_params
    return embeddings + rest * BYTES_PER_WEIGHT[spec.weights_dtype], experts


def weight_bytes_per_gpu(spec: ModelSpec, layout: Parallelism) -> float:
    """Non-expert weights shard over TP x PP; experts over EP (= DP x TP) x PP when EP is on."""
    dense, experts = weight_bytes(spec)
    expert_shards = layout.expert_parallel_size if layout.expert else layout.tensor
    return dense / layout.model_parallel_size + experts / (expert_shards * layout.pipeline)


def kv_bytes_per_token(spec: ModelSpec) -> int:
    """KV cache of one token over all layers: 2 x layers x KV heads x head dim (GQA), or
    layers x (compressed KV rank + RoPE key) for MLA, which caches one latent per token."""
    arch = spec.architecture
    dtype_bytes = 1 if spec.kv_cache_dtype == "fp8" else 2
    if arch.attention == "mla":
        assert arch.kv_lora_rank is not None and arch.qk_rope_head_dim is not None
        per_layer = arch.kv_lora_rank + arch.qk_rope_head_dim
    else:
        per_layer = 2 * arch.num_kv_heads * arch.head_dim
    return arch.full_attention_layers * per_layer * dtype_bytes


def kv_bytes_per_token_per_gpu(spec: ModelSpec, layout: Parallelism) -> int:
    """Layers split over pipeline stages; GQA KV heads split over TP (replicated once TP exceeds
    them); the MLA latent is replicated on every TP rank."""
    arch = spec.architecture
    layers_per_stage = math.ceil(arch.full_attention_layers / layout.pipeline)
    per_layer = kv_bytes_per_token(spec) // arch.full_attention_layers
    if arch.attention == "gqa":
        kv_heads_per_gpu = math.ceil(arch.num_kv_heads / layout.tensor)
        per_layer = per_layer * kv_heads_per_gpu // arch.num_kv_heads
    return layers_per_stage * per_layer


def activation_bytes_per_gpu(spec: ModelSpec, layout: Parallelism) -> int:
    """Peak of vLLM's profiling step: one max_num_batched_tokens batch through the widest MLP
    (a MoE token visits experts_per_token experts) plus residual/attention buffers, and FP32
    logits for max_num_seqs sequences."""
    arch = spec.architecture
    mlp_width = arch.intermediate_size * max(1, arch.experts_per_token)
    per_token = (2 * mlp_width / layout.tensor + 4 * arch.hidden_size) * ACTIVATION_BYTES
    logits = spec.max_num_seqs * arch.vocab_size / layout.tensor * LOGIT_BYTES
    return int(spec.max_num_batched_tokens * per_token + logits)


def memory(spec: ModelSpec, layout: Parallelism) -> MemoryBreakdown:
    usable = int(spec.gpu.memory_bytes * spec.gpu_memory_utilization)
    weights = int(weight_bytes_per_gpu(spec, layout))
    activations = activation_bytes_per_gpu(spec, layout)
    kv_free = usable - weights - activations - RUNTIME_OVERHEAD_BYTES
    per_token_gpu = kv_bytes_per_token_per_gpu(spec, layout)
    tokens_per_rank = max(0, kv_free // per_token_gpu)
    return MemoryBreakdown(
        usable_bytes=usable,
        weights_bytes=weights,
        activation_bytes=activations,
        runtime_overhead_bytes=RUNTIME_OVERHEAD_BYTES,
        kv_cache_bytes=kv_free,
        kv_cache_bytes_per_token=kv_bytes_per_token(spec),
        kv_cache_bytes_per_token_per_gpu=per_token_gpu,
        kv_capacity_tokens=tokens_per_rank * layout.data,
        max_concurrent_sequences=(tokens_per_rank // spec.max_model_len) * layout.data,
        fits=tokens_per_rank >= spec.max_model_len,
    )


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


def placement(spec: ModelSpec, layout: Parallelism, autoscaling: Autoscaling) -> Placement:
    gpus = layout.gpus_per_replica
    machine = choose_machine(spec, gpus)
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


# --- speed --------------------------------------------------------------------------------


def _math_flops(spec: ModelSpec) -> float:
    """FP8 weights run FP8 math only where the GPU has it; elsewhere they are weight-only."""
    gpu = spec.gpu
    if spec.weights_dtype == "fp8" and gpu.has_fp8_math:
        assert gpu.fp8_dense_flops is not None
        return gpu.fp8_dense_flops
    return gpu.bf16_dense_flops


def _link_bandwidth(spec: ModelSpec, machine: MachineType, group_gpus: int) -> float:
    """NVLink inside a node; the node's GPU network once a group crosses nodes."""
    if group_gpus <= machine.gpus_per_node:
        return spec.gpu.nvlink_bandwidth_bytes_per_s
    return machine.network_bandwidth_bytes_per_s / machine.gpus_per_node


def _allreduce_s(spec: ModelSpec, machine: MachineType, layout: Parallelism, tokens: int) -> float:
    """Two ring all-reduces of the hidden state per layer (attention and MLP outputs)."""
    tp = layout.tensor
    if tp == 1:
        return 0.0
    message = tokens * spec.architecture.hidden_size * ACTIVATION_BYTES
    bandwidth = _link_bandwidth(spec, machine, tp)
    one = ALLREDUCE_LATENCY_S + 2 * (tp - 1) / tp * message / bandwidth
    return 2 * spec.architecture.num_layers * one


def alltoall_bytes_per_rank(spec: ModelSpec, layout: Parallelism, tokens_per_rank: int) -> float:
    """Bytes one rank sends to the other expert-parallel ranks in one dispatch (or combine) of
    one MoE layer: each of *its own* tokens' hidden states goes to the ranks holding the
    experts_per_token experts it routes to, of which (EP - 1) / EP are elsewhere. Every DP rank
    sends its own batch at the same time; no rank sends the whole group's tokens."""
    ep = layout.expert_parallel_size
    arch = spec.architecture
    message = tokens_per_rank * arch.experts_per_token * arch.hidden_size * ACTIVATION_BYTES
    return (ep - 1) / ep * message


def alltoall_s(
    spec: ModelSpec, machine: MachineType, layout: Parallelism, tokens_per_rank: int
) -> float:
    """Expert parallelism dispatches and combines each token's hidden state per MoE layer."""
    if layout.expert_parallel_size == 1:
        return 0.0
    bandwidth = _link_bandwidth(spec, machine, layout.expert_parallel_size)
    one = ALLTOALL_LATENCY_S + alltoall_bytes_per_rank(spec, layout, tokens_per_rank) / bandwidth
    return 2 * spec.architecture.num_layers * one


def _pipeline_s(spec: ModelSpec, machine: MachineType, layout: Parallelism, tokens: int) -> float:
    if layout.pipeline == 1:
        return 0.0
    message = tokens * spec.architecture.hidden_size * ACTIVATION_BYTES
    bandwidth = _link_bandwidth(spec, machine, layout.model_parallel_size)
    return (layout.pipeline - 1) * (P2P_LATENCY_S + message / bandwidth)


def _comm_s(spec: ModelSpec, machine: MachineType, layout: Parallelism, tokens: int) -> float:
    return (
        _allreduce_s(spec, machine, layout, tokens)
        + alltoall_s(spec, machine, layout, tokens)
        + _pipeline_s(spec, machine, layout, tokens)
    )


def _expert_bytes_touched_per_gpu(spec: ModelSpec, layout: Parallelism, tokens: int) -> float:
    """A decode step reads only the experts its tokens route to: with t tokens choosing k of E
    experts each, a given expert is read with probability 1 - (1 - k/E)^t."""
    arch = spec.architecture
    if not arch.is_moe:
        return 0.0
    _, experts = weight_bytes(spec)
    shards = layout.expert_parallel_size if layout.expert else layout.tensor
    touched = 1 - (1 - arch.experts_per_token / arch.num_experts) ** tokens
    return experts / (shards * layout.pipeline) * touched


def decode_step_s(
    spec: ModelSpec, machine: MachineType, layout: Parallelism, batch: int, context: int
) -> float:
    """One decode step for `batch` sequences of `context` tokens on one DP rank."""
    dense, _ = weight_bytes(spec)
    group_tokens = batch * layout.data  # experts see every DP rank's tokens
    weights_read = dense / layout.model_parallel_size + _expert_bytes_touched_per_gpu(
        spec, layout, group_tokens
    )
    kv_read = batch * context * kv_bytes_per_token_per_gpu(spec, layout)
    # A token passes the pipeline stages one after another, so each stage's time adds up.
    memory_s = (
        layout.pipeline
        * (weights_read + kv_read)
        / (spec.gpu.hbm_bandwidth_bytes_per_s * HBM_EFFICIENCY)
    )
    compute_s = (
        2
        * spec.architecture.active_params
        * batch
        / (layout.tensor * _math_flops(spec) * DECODE_MFU)
    )
    return max(memory_s, compute_s) + _comm_s(spec, machine, layout, batch) + STEP_OVERHEAD_S


def prefill_compute_s(spec: ModelSpec, layout: Parallelism, tokens: int) -> float:
    """Math for `tokens` prompt tokens: 2 x active params per token plus causal attention."""
    arch = spec.architecture
    attention_width = arch.num_attention_heads * arch.head_dim
    flops = (
        2 * arch.active_params * tokens
        + 2 * tokens * tokens * attention_width * arch.full_attention_layers
    )
    return flops / (layout.tensor * _math_flops(spec) * PREFILL_MFU)


def prefill_s(spec: ModelSpec, machine: MachineType, layout: Parallelism, tokens: int) -> float:
    """Chunked prefill of one prompt: math-bound, at least one weight read per chunk."""
    chunks = math.ceil(tokens / spec.max_num_batched_tokens)
    memory_s = (
        chunks
        * layout.pipeline
        * weight_bytes_per_gpu(spec, layout)
        / (spec.gpu.hbm_bandwidth_bytes_per_s * HBM_EFFICIENCY)
    )
    comm = _comm_s(spec, machine, layout, tokens) + (chunks - 1) * _comm_s(spec, machine, layout, 0)
    return max(prefill_compute_s(spec, layout, tokens), memory_s) + comm + chunks * STEP_OVERHEAD_S


def _kv_transfer_s(spec: ModelSpec, machine: MachineType) -> float:
    """P/D: the prefill side ships the prompt's KV cache to the decode side over the network."""
    size = spec.workload.input_tokens * kv_bytes_per_token(spec)
    return P2P_LATENCY_S + size / machine.network_bandwidth_bytes_per_s


def estimates(
    spec: ModelSpec,
    role: Role,
    layout: Parallelism,
    mem: MemoryBreakdown,
    itl_target_s: float | None = None,
) -> Estimates:
    """Latency at batch 1 and throughput at the largest batch the KV cache, max_num_seqs and
    (if given) an inter-token latency target allow."""
    machine = choose_machine(spec, layout.gpus_per_replica)
    work = spec.workload
    prompt = prefill_s(spec, machine, layout, work.input_tokens)
    if role == "prefill":
        prompt += _kv_transfer_s(spec, machine)
    context = work.input_tokens + work.output_tokens // 2
    itl_1 = decode_step_s(spec, machine, layout, 1, context)

    per_rank_tokens = mem.kv_capacity_tokens // layout.data
    batch = min(spec.max_num_seqs, per_rank_tokens // (work.input_tokens + work.output_tokens))
    if itl_target_s is not None:
        while batch > 1 and decode_step_s(spec, machine, layout, batch, context) > itl_target_s:
            batch = max(1, int(batch * 0.8))
    if batch < 1:
        return Estimates(
            prefill_s=prompt, ttft_s=prompt, itl_s=itl_1, decode_batch=0, itl_at_batch_s=itl_1,
            requests_per_s=0.0, output_tokens_per_s=0.0,
        )  # fmt: skip
    step = decode_step_s(spec, machine, layout, batch, context)
    prefill_cost = prefill_compute_s(spec, layout, work.input_tokens)
    decode_cost = work.output_tokens * step / batch
    # Each request occupies its rank for its prefill math plus its share of decode steps; a
    # prefill-only replica pays no decode, a decode-only one no prefill.
    seconds_per_request = {
        "server": prefill_cost + decode_cost,
        "prefill": prefill_cost,
        "decode": decode_cost,
    }[role]
    requests_per_s = layout.data / seconds_per_request
    return Estimates(
        prefill_s=prompt,
        ttft_s=prompt + (itl_1 if role != "prefill" else 0.0),
        itl_s=itl_1,
        decode_batch=batch,
        itl_at_batch_s=step,
        requests_per_s=requests_per_s,
        output_tokens_per_s=requests_per_s * work.output_tokens,
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


def smallest_layout(spec: ModelSpec, layout: Parallelism) -> Parallelism | None:
    """The fewest GPUs on which the model fits, among the layouts vLLM serves well."""
    for candidate in _candidate_layouts(spec, layout):
        if memory(spec, candidate).fits:
            return candidate
    return None


def verdicts(
    spec: ModelSpec, role: Role, layout: Parallelism, mem: MemoryBreakdown
) -> list[Verdict]:
    arch, gpu = spec.architecture, spec.gpu
    found: list[Verdict] = []

    def say(
        code: str, severity: Severity, message: str, suggestion: Parallelism | None = None
    ) -> None:
        found.append(
            Verdict(code=code, severity=severity, role=role, message=message, suggestion=suggestion)
        )

    smallest = smallest_layout(spec, layout)
    per_node = _largest_node(spec)
    machine = choose_machine(spec, layout.gpus_per_replica)
    if layout.tensor > per_node:
        stages = math.ceil(layout.tensor * layout.pipeline / per_node)
        fix = Parallelism(tensor=per_node, pipeline=stages, data=layout.data, expert=layout.expert)
        say(
            "tp-crosses-node", "error",
            f"tensor={layout.tensor} needs {layout.tensor} GPUs on one node; {machine.name} has "
            f"{per_node} — use {_describe(fix)}, or a smaller model",
            fix,
        )  # fmt: skip
    tensor_sizes = valid_tensor_sizes(spec, max(layout.tensor, 1))
    if layout.tensor not in tensor_sizes:
        fix = layout.model_copy(update={"tensor": max(tensor_sizes)})
        say(
            "tp-heads", "error",
            f"tensor={layout.tensor} does not divide {arch.key}'s {arch.num_attention_heads} "
            f"attention heads and {arch.num_kv_heads} KV heads — use {_describe(fix)}",
            fix,
        )  # fmt: skip
    if not mem.fits:
        needed = mem.weights_bytes + mem.activation_bytes + mem.runtime_overhead_bytes
        needed += spec.max_model_len * mem.kv_cache_bytes_per_token_per_gpu
        fix_text = (
            f"use {_describe(smallest)}" if smallest else f"no layout on {gpu.key} nodes holds it"
        )
        say(
            "does-not-fit", "error",
            f"{arch.key} ({spec.weights_dtype}) with {_describe(layout)} needs "
            f"{needed / GIB:.1f} GiB per GPU for weights and one {spec.max_model_len:,}-token "
            f"sequence; {gpu.key} offers {mem.usable_bytes / GIB:.1f} GiB at "
            f"gpu_memory_utilization {spec.gpu_memory_utilization} — {fix_text}",
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
    if layout.expert and not arch.is_moe:
        say(
            "ep-on-dense", "error",
            f"expert parallelism needs a mixture-of-experts model; {arch.key} is dense — set "
            "parallelism.expert: false (and scale with replicas instead of data)",
            layout.model_copy(update={"expert": False, "data": 1}),
        )  # fmt: skip
    elif layout.expert and arch.num_experts % layout.expert_parallel_size:
        sizes = [d for d in (1, 2, 4, 8, 16, 32, 64) if arch.num_experts % (d * layout.tensor) == 0]
        fix = layout.model_copy(update={"data": max(d for d in sizes if d <= max(layout.data, 1))})
        say(
            "ep-size-indivisible", "error",
            f"expert-parallel size {layout.expert_parallel_size} (data {layout.data} x tensor "
            f"{layout.tensor}) does not divide {arch.key}'s {arch.num_experts} experts — use "
            f"{_describe(fix)}",
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


def _groups(spec: ModelSpec) -> list[tuple[Role, Parallelism, Autoscaling]]:
    if spec.disaggregation is None:
        return [("server", spec.parallelism, spec.autoscaling)]
    pd = spec.disaggregation
    return [
        ("prefill", pd.prefill.parallelism or spec.parallelism, pd.prefill.autoscaling),
        ("decode", pd.decode.parallelism or spec.parallelism, pd.decode.autoscaling),
    ]


def plan(
    spec: ModelSpec,
    prices: Mapping[str, float] | None = None,
    itl_target_s: float | None = None,
) -> Plan:
    """Plan a spec. `prices` overrides catalog prices per machine type (USD per node-hour)."""
    groups: list[GroupPlan] = []
    found: list[Verdict] = []
    for role, layout, autoscaling in _groups(spec):
        mem = memory(spec, layout)
        where = placement(spec, layout, autoscaling)
        est = estimates(spec, role, layout, mem, itl_target_s)
        node_price = (prices or {}).get(
            where.machine_type, catalog.MACHINE_TYPES[where.machine_type].price_per_hour_usd
        )
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
        ttft_s=first.estimates.prefill_s + last.estimates.itl_s,
        itl_s=last.estimates.itl_s,
        requests_per_s=requests_per_s,
        output_tokens_per_s=output_tokens_per_s,
        usd_per_million_output_tokens=(
            unit_price / (output_tokens_per_s * 3600) * 1e6 if output_tokens_per_s else None
        ),
    )
