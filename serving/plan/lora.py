"""What LoRA adapters cost a replica: GPU memory vLLM preallocates for them, CPU memory for the
adapters it keeps loaded, how many it holds, and the decode-step time its LoRA kernels add.

GPU memory, as vLLM 0.22 allocates it (`vllm/lora/layers/base_linear.py:99-150`,
`column_parallel_linear.py`, `row_parallel_linear.py`, `vocal_parallel_embedding.py:24-66`,
`logits_processor.py:84-110`): with no `lora_target_modules`, every linear layer, the token
embeddings and the LM head get a LoRA wrapper (`vllm/lora/utils.py:208-229`,
`model_manager.py:375-420`). Each wrapper holds, for each of `max_loras` slots at
`max_lora_rank` r, an A of r x in and a B of out x r per slice, in the model's dtype
(`lora_dtype: auto`). Under tensor parallelism a column-parallel layer (qkv, gate_up) keeps A
whole and shards B's out; a row-parallel one (o, down) shards A's in and keeps B whole. So per
decoder layer and slot, in weights:

    qkv_proj      A: 3 x r x hidden                 B: (q / tp + 2 kv_tp) x r
    o_proj        A: r x q / tp                     B: hidden x r
    gate_up_proj  A: 2 x r x hidden                 B: 2 x intermediate / tp x r
    down_proj     A: r x intermediate / tp          B: hidden x r

with q = heads x head_dim and kv_tp = ceil(KV heads / tp) x head_dim (a KV head is replicated
once TP exceeds them); plus, once per model, the embeddings
(A: vocab x r, B: hidden x r) and the LM head (A: r x hidden, B: vocab x r), unsharded. The
whole is preallocated at start, whether or not an adapter is loaded: it comes out of the KV cache.

CPU memory: vLLM keeps up to `max_cpu_loras` adapters loaded in each worker process
(`vllm/lora/worker_manager.py`, an LRU cache), each at its own rank and whole (a worker slices
its shard when it copies an adapter into a GPU slot). The layout above at the adapter's rank,
with tp = 1, bounds it from above (an adapter that targets fewer modules is smaller).

Load time: an adapter not in a worker's CPU cache is read from disk within the engine step that
first needs it (`vllm/lora/worker_manager.py` `_apply_adapters` -> `add_adapter` ->
`_load_adapter`, called from the model runner before the step's forward pass), so the whole batch
waits for it. Its safetensors, whole at its rank, come from the weights bucket's Cloud Storage
FUSE mount with one reader: one fio job's share of gcsfuse's sequential-read benchmark. The copy
into a GPU slot (tens of MB over PCIe, a few ms) is left out.

Decode cost: Punica (Chen et al., "Punica: Multi-Tenant LoRA Serving", MLSys 2024,
arXiv:2310.18547, abstract and section 7) measures its batched LoRA kernel (SGMV, the kernel
vLLM's Punica wrapper descends from) adding about 2 ms per generated token to a batch mixing
adapters, on Llama-2 7B/13B/70B on A100s. The planner adds that to each decode step of a replica
that serves adapters; S-LoRA (Sheng et al., MLSys 2024, arXiv:2311.03285) reports an overhead of
the same order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from serving.catalog import GIB
from serving.frozen import Frozen
from serving.spec.lora import Lora
from serving.spec.parts import Parallelism
from serving.spec.profile import ModelSpec

if TYPE_CHECKING:  # the speed model reads memory, which reads this module
    from serving.plan.speed import Estimates

# LoRA weights are kept in the model's activation dtype (vLLM's lora_dtype "auto": BF16).
LORA_DTYPE_BYTES = 2
# Punica's measured cost of its batched LoRA kernels, per generated token (arXiv:2310.18547).
LORA_DECODE_STEP_S = 2e-3
LORA_DECODE_SOURCE = "Punica, arXiv:2310.18547: about 2 ms per token for batched LoRA kernels"
# One reader's share of Cloud Storage FUSE's sequential reads: 13,433.4 MB/s over 10 fio jobs
# reading 100 MiB files (gcsfuse v3.4.3, C4-standard-192 at 200 Gbps; github.com/
# GoogleCloudPlatform/gcsfuse docs/benchmarks.md, "Sequential Reads").
ADAPTER_READ_BYTES_PER_S = 13_433.4e6 / 10


def weights_per_slot(spec: ModelSpec, rank: int, tensor: int = 1, pipeline: int = 1) -> int:
    """LoRA weights (A and B) of one adapter slot at `rank` on one GPU of a TP x PP layout: the
    decoder layers of one pipeline stage (the first stage's share, rounded up) plus the
    embeddings and LM head, which the planner counts on every stage so as not to undercount."""
    arch = spec.architecture
    hidden, inter = arch.hidden_size, arch.intermediate_size
    q = arch.num_attention_heads * arch.head_dim // tensor
    # KV heads are replicated once TP exceeds them (vLLM's QKVParallelLinear: one per rank).
    kv = -(-arch.num_kv_heads // tensor) * arch.head_dim
    per_layer = (
        3 * rank * hidden + (q + 2 * kv) * rank  # qkv_proj
        + rank * q + hidden * rank  # o_proj
        + 2 * rank * hidden + 2 * (inter // tensor) * rank  # gate_up_proj
        + rank * (inter // tensor) + hidden * rank  # down_proj
    )  # fmt: skip
    layers = -(-arch.num_layers // pipeline)
    once = arch.vocab_size * rank + hidden * rank + rank * hidden + arch.vocab_size * rank
    return layers * per_layer + once


def adapter_bytes(spec: ModelSpec, rank: int) -> int:
    """One adapter at `rank` as a worker loads it: whole (every module, no TP shard), BF16."""
    return weights_per_slot(spec, rank) * LORA_DTYPE_BYTES


def adapter_load_s(spec: ModelSpec, rank: int) -> float:
    """Seconds one load of an adapter at `rank` from the weights bucket's mount holds up the
    engine step that needs it (the module says why)."""
    return adapter_bytes(spec, rank) / ADAPTER_READ_BYTES_PER_S


def gpu_bytes(spec: ModelSpec, layout: Parallelism) -> int:
    """What vLLM preallocates on each GPU of a replica: max_loras slots at max_lora_rank."""
    if spec.lora is None:
        return 0
    lora = spec.lora
    slot = weights_per_slot(spec, lora.max_lora_rank, layout.tensor, layout.pipeline)
    return lora.max_loras * slot * LORA_DTYPE_BYTES


def cpu_bytes_per_worker(spec: ModelSpec) -> int:
    """What the adapters a worker process keeps loaded take in CPU memory: the max_cpu_loras
    largest of the profile's adapters, each whole at its own rank."""
    if spec.lora is None:
        return 0
    sizes = sorted((adapter_bytes(spec, a.rank) for a in spec.lora.adapters), reverse=True)
    return sum(sizes[: spec.lora.cpu_loras])


class LoraPlan(Frozen):
    """What serving the profile's adapters costs one replica."""

    adapters: int = Field(description="Adapters the profile serves.")
    adapters_on_gpu: int = Field(description="Adapters one engine step mixes (max_loras).")
    adapters_in_cpu: int = Field(
        description="Adapters a replica keeps loaded (max_cpu_loras); more are loaded on demand."
    )
    max_lora_rank: int
    gpu_bytes_per_gpu: int = Field(
        description="LoRA slots vLLM preallocates on each GPU, taken from the KV cache."
    )
    cpu_bytes_per_worker: int = Field(
        description="The adapters a worker process holds in CPU memory, at most."
    )
    decode_step_overhead_s: float = Field(
        description=f"Time the LoRA kernels add to a decode step ({LORA_DECODE_SOURCE})."
    )
    all_adapters_resident: bool = Field(
        description="Every adapter fits in CPU memory at once: none is ever reloaded."
    )
    load_s: float = Field(
        description="What loading the largest adapter from the bucket's mount adds to the "
        "engine step that needs it (every request in the batch waits)."
    )

    @property
    def summary(self) -> str:
        return (
            f"{self.adapters} adapters, {self.adapters_on_gpu} per step on the GPU, "
            f"{self.adapters_in_cpu} held in CPU memory; {self.gpu_bytes_per_gpu / GIB:.2f} GiB "
            f"per GPU at rank {self.max_lora_rank}; a load stalls a step {self.load_s * 1e3:.0f} ms"
        )


def lora_plan(spec: ModelSpec, layout: Parallelism) -> LoraPlan | None:
    """The LoRA terms of one replica of `layout`; None when the profile serves no adapter."""
    lora: Lora | None = spec.lora
    if lora is None:
        return None
    return LoraPlan(
        adapters=len(lora.adapters),
        adapters_on_gpu=lora.max_loras,
        adapters_in_cpu=lora.cpu_loras,
        max_lora_rank=lora.max_lora_rank,
        gpu_bytes_per_gpu=gpu_bytes(spec, layout),
        cpu_bytes_per_worker=cpu_bytes_per_worker(spec),
        decode_step_overhead_s=LORA_DECODE_STEP_S,
        all_adapters_resident=lora.cpu_loras >= len(lora.adapters),
        load_s=max(adapter_load_s(spec, adapter.rank) for adapter in lora.adapters),
    )


def decode_throughput_factor(itl_s: float, plan: LoraPlan | None) -> float:
    """The share of its throughput a replica keeps when each decode step of `itl_s` pays the
    LoRA kernels' time too (1.0 without adapters)."""
    if plan is None or itl_s <= 0:
        return 1.0
    return itl_s / (itl_s + plan.decode_step_overhead_s)


def applied(estimates: Estimates, plan: LoraPlan | None) -> Estimates:
    """The estimates of a replica that serves adapters: every decode step (the first token's
    too) pays the LoRA kernels' time, and throughput falls by the share that adds to a step at
    the planned batch."""
    if plan is None:
        return estimates
    step = plan.decode_step_overhead_s
    factor = decode_throughput_factor(estimates.itl_at_batch_s, plan)
    return estimates.model_copy(
        update={
            "ttft_s": estimates.ttft_s + step,
            "itl_s": estimates.itl_s + step,
            "itl_at_batch_s": estimates.itl_at_batch_s + step,
            "requests_per_s": estimates.requests_per_s * factor,
            "output_tokens_per_s": estimates.output_tokens_per_s * factor,
        }
    )
