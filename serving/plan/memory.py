"""Per-GPU memory of one replica, as vLLM lays it out.

`gpu_memory_utilization` of the board is usable. The weights as vLLM loads them take their part,
the peak of vLLM's profiling run (one `max_num_batched_tokens` forward pass, then one sampler
pass over `max_num_seqs` FP32 logits: the larger of the two), the runtime's own buffers and any
LoRA adapter slots (`serving.plan.lora`) take theirs, and the rest is KV cache, laid out as
vLLM's KV-cache manager lays it (`kv_cache`). Each term says where its size comes from; the
published runs that pin the totals are in `tests/serving/plan/test_planner.py` (gpt-oss-120b
at 131k on one H100 runs out of memory, Qwen3-32B at 32k on one 80 GB GPU serves).
"""

from __future__ import annotations

import math

from pydantic import Field

from serving.catalog import BYTES_PER_WEIGHT, GIB
from serving.frozen import Frozen
from serving.plan import kv_cache, lora
from serving.spec.parts import Parallelism
from serving.spec.profile import ModelSpec

# Runtime buffers every GPU holds outside weights, activations and KV cache: cuBLAS/cuDNN
# workspaces and the allocator's slack, plus the CUDA-graph pool vLLM captures for decode
# batches (piecewise graphs share activations with the profiling run, so the pool stays small).
RUNTIME_BASE_BYTES = int(0.4 * GIB)
# What a model-parallel group adds per GPU: NCCL communicators and vLLM's custom all-reduce
# IPC buffers (and DeepEP/all-to-all buffers under expert parallelism).
RUNTIME_COMMUNICATION_BYTES = int(0.6 * GIB)
# vLLM profiles the sampler with max_num_seqs rows of FP32 logits and keeps, at its peak, the
# logits, their softmax, log-probabilities and the top-k/top-p sort buffers: four copies.
SAMPLER_LOGIT_COPIES = 4
ACTIVATION_BYTES = 2  # BF16 activations
LOGIT_BYTES = 4  # vLLM computes logits in FP32


class MemoryBreakdown(Frozen):
    """Per-GPU memory of one replica, in bytes."""

    usable_bytes: int = Field(description="gpu_memory_utilization x the board's memory.")
    weights_bytes: int = Field(description="This GPU's shard of the weights, as loaded.")
    activation_bytes: int = Field(
        description="Peak of vLLM's profiling run: one max_num_batched_tokens step, then one "
        "sampler pass over max_num_seqs sequences; the larger of the two."
    )
    runtime_overhead_bytes: int
    lora_bytes: int = Field(
        default=0,
        description="LoRA adapter slots vLLM preallocates (max_loras at max_lora_rank; "
        "serving.plan.lora); 0 without adapters.",
    )
    kv_cache_bytes: int = Field(description="What is left for KV cache (negative: does not fit).")
    kv_cache_bytes_per_token: int = Field(
        description="Whole model: what each token of a sequence adds in the layers whose cache "
        "grows with it (full attention, MLA), as vLLM allocates it."
    )
    kv_cache_bytes_per_sequence: int = Field(
        description="Whole model: what one sequence of max_model_len holds in the layers whose "
        "cache is capped or fixed (sliding and chunked windows, linear-attention state), as vLLM "
        "allocates it, padding of its layer groups included."
    )
    kv_cache_bytes_per_token_per_gpu: int
    kv_cache_blocks: int = Field(description="vLLM's KV-cache blocks on each GPU.")
    kv_capacity_tokens: int = Field(
        description="Tokens of context one replica holds: vLLM's 'GPU KV cache size', the "
        "maximum concurrency times max_model_len, over its DP ranks."
    )
    max_concurrent_sequences: int = Field(description="Sequences of max_model_len held at once.")
    fits: bool = Field(description="Weights plus KV for one max_model_len sequence fit.")


def weight_bytes(spec: ModelSpec, as_loaded: bool = True) -> tuple[float, float]:
    """(non-expert, expert) weight bytes of the whole model.

    Embeddings and the LM head stay BF16 under FP8 quantization, as in vLLM and published FP8
    checkpoints. Packed formats take what vLLM's kernels load them as (`as_loaded`), which for
    MXFP4 on GPUs without FP4 tensor cores is more than their 4.25 bits.
    """
    arch = spec.architecture
    embeddings = arch.embedding_params * BYTES_PER_WEIGHT["bf16"]
    experts = arch.expert_params * arch.bytes_per_weight(spec.expert_weights_dtype, as_loaded)
    rest = arch.total_params - arch.embedding_params - arch.expert_params
    return embeddings + rest * arch.bytes_per_weight(spec.weights_dtype, as_loaded), experts


def replicated_params(spec: ModelSpec) -> float:
    """Weights every tensor-parallel rank holds whole: vLLM's MLA layers keep the down-projection
    of the hidden state to the compressed query and latent KV (fused_qkv_a_proj, hidden ->
    q_lora_rank + kv_lora_rank + qk_rope_head_dim; kv_a_proj_with_mqa alone where the query is
    not compressed) unsharded (`disable_tp=True` / ReplicatedLinear in
    vllm/model_executor/models/deepseek_v2.py). DeepSeek-V3: 61 x 7168 x 2112 weights, 0.92 GB
    in FP8, that each of 8 TP ranks stores, reads every step and multiplies every token by,
    instead of an eighth of them."""
    arch = spec.architecture
    if arch.attention != "mla":
        return 0.0
    assert arch.kv_lora_rank is not None and arch.qk_rope_head_dim is not None
    width = (arch.q_lora_rank or 0) + arch.kv_lora_rank + arch.qk_rope_head_dim
    return float(arch.num_layers * arch.hidden_size * width)


def replicated_weight_bytes(spec: ModelSpec) -> float:
    """Bytes of the replicated weights (`replicated_params`) as loaded."""
    return replicated_params(spec) * spec.architecture.bytes_per_weight(spec.weights_dtype)


def dense_weight_bytes_per_gpu(spec: ModelSpec, layout: Parallelism) -> float:
    """Non-expert weights shard over TP x PP, but for the replicated ones, which shard over
    pipeline stages only."""
    dense, _ = weight_bytes(spec)
    replicated = replicated_weight_bytes(spec)
    return (dense - replicated) / layout.model_parallel_size + replicated / layout.pipeline


def streamed_weight_bytes_per_gpu(spec: ModelSpec, layout: Parallelism, tokens: float) -> float:
    """The non-expert weights one step of `tokens` tokens reads from HBM: all of
    dense_weight_bytes_per_gpu but the input embedding's rows no token of the step looks up.
    vLLM's input embedding is `F.embedding` over this rank's vocabulary shard, a gather of one
    row a token (VocabParallelEmbedding.forward, vllm/model_executor/layers/
    vocab_parallel_embedding.py, vLLM 0.22), so an untied table is read a row a token, not
    whole; a tied table is the LM head's matrix, which the head reads whole every step."""
    arch = spec.architecture
    dense = dense_weight_bytes_per_gpu(spec, layout)
    if arch.tied_embeddings:
        return dense
    row = arch.hidden_size * BYTES_PER_WEIGHT["bf16"]
    table = arch.vocab_size * row
    return dense - (table - min(tokens, arch.vocab_size) * row) / layout.model_parallel_size


def weight_bytes_per_gpu(spec: ModelSpec, layout: Parallelism) -> float:
    """Non-expert weights as above; experts over EP (= DP x TP) x PP when EP is on, else TP x PP."""
    _, experts = weight_bytes(spec)
    expert_shards = layout.expert_parallel_size if layout.expert else layout.tensor
    dense = dense_weight_bytes_per_gpu(spec, layout)
    return dense + experts / (expert_shards * layout.pipeline)


def kv_bytes_per_token(spec: ModelSpec) -> int:
    """What attention reads a token of context, for the speed model: 2 x layers x KV heads x
    head dim (GQA), or layers x (compressed KV rank + RoPE key) for MLA, which caches one latent
    per token. (What vLLM allocates, windows and state included, is `kv_cache`'s.)"""
    arch = spec.architecture
    dtype_bytes = 1 if spec.kv_cache_dtype == "fp8" else 2
    if arch.attention == "mla":
        assert arch.kv_lora_rank is not None and arch.qk_rope_head_dim is not None
        per_layer = arch.kv_lora_rank + arch.qk_rope_head_dim
    else:
        per_layer = 2 * arch.num_kv_heads * arch.head_dim
    return arch.context_attention_layers * per_layer * dtype_bytes


def kv_bytes_per_token_per_gpu(spec: ModelSpec, layout: Parallelism) -> int:
    """Layers split over pipeline stages; GQA KV heads split over TP (replicated once TP exceeds
    them); the MLA latent is replicated on every TP rank."""
    arch = spec.architecture
    layers_per_stage = math.ceil(arch.context_attention_layers / layout.pipeline)
    per_layer = kv_bytes_per_token(spec) // arch.context_attention_layers
    if arch.attention == "gqa":
        kv_heads_per_gpu = math.ceil(arch.num_kv_heads / layout.tensor)
        per_layer = per_layer * kv_heads_per_gpu // arch.num_kv_heads
    return layers_per_stage * per_layer


def activation_bytes_per_gpu(spec: ModelSpec, layout: Parallelism) -> int:
    """Peak of vLLM's profiling run: one max_num_batched_tokens batch through the widest MLP
    (a MoE token visits experts_per_token experts) plus residual/attention buffers, or the
    sampler over max_num_seqs rows of FP32 logits (whole vocabulary on every rank), whichever
    is larger. The two run one after the other (GPUModelRunner.profile_run, vLLM 0.22: the
    dummy forward pass returns before _dummy_sampler_run starts, freeing its intermediates), and
    vLLM reads the peak of the allocator's allocated bytes over the run
    (gpu_worker.determine_available_memory, "allocated_bytes.all.peak"): the larger peak, not
    their sum."""
    arch = spec.architecture
    mlp_width = arch.intermediate_size * max(1, arch.experts_per_token)
    per_token = (2 * mlp_width / layout.tensor + 4 * arch.hidden_size) * ACTIVATION_BYTES
    forward = spec.max_num_batched_tokens * per_token
    sampler = SAMPLER_LOGIT_COPIES * spec.max_num_seqs * arch.vocab_size * LOGIT_BYTES
    return int(max(forward, sampler))


def runtime_overhead_bytes(layout: Parallelism) -> int:
    """A lone GPU needs no communicators; any model-parallel or expert-parallel group does."""
    communicating = layout.model_parallel_size > 1 or layout.expert_parallel_size > 1
    return RUNTIME_BASE_BYTES + (RUNTIME_COMMUNICATION_BYTES if communicating else 0)


def memory(spec: ModelSpec, layout: Parallelism) -> MemoryBreakdown:
    usable = int(spec.gpu.memory_bytes * spec.gpu_memory_utilization)
    weights = int(weight_bytes_per_gpu(spec, layout))
    activations = activation_bytes_per_gpu(spec, layout)
    overhead = runtime_overhead_bytes(layout)
    adapters = lora.gpu_bytes(spec, layout)
    kv_free = usable - weights - activations - overhead - adapters
    per_gpu = kv_cache.layout(spec, layout)
    whole = kv_cache.layout(spec, Parallelism())
    blocks = per_gpu.num_blocks(kv_free)
    concurrency = per_gpu.sequences(blocks, spec.max_model_len)
    return MemoryBreakdown(
        usable_bytes=usable,
        weights_bytes=weights,
        activation_bytes=activations,
        runtime_overhead_bytes=overhead,
        lora_bytes=adapters,
        kv_cache_bytes=kv_free,
        kv_cache_bytes_per_token=whole.bytes_per_token,
        kv_cache_bytes_per_sequence=whole.bytes_per_sequence(spec.max_model_len),
        kv_cache_bytes_per_token_per_gpu=per_gpu.bytes_per_token,
        kv_cache_blocks=blocks,
        kv_capacity_tokens=int(concurrency * spec.max_model_len) * layout.data,
        max_concurrent_sequences=int(concurrency) * layout.data,
        fits=concurrency >= 1,
    )
