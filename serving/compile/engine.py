"""vLLM's engine arguments for one replica group: its layout, quantization, context and
batching, the fast paths vLLM itself must be asked for, and the profile's own `engine_args`,
which win over everything derived here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from serving.compile.lora import lora_engine_kwargs
from serving.spec.parts import Parallelism
from serving.spec.profile import ModelSpec


def engine_kwargs(
    spec: ModelSpec, layout: Parallelism, pattern_kwargs: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The `engine_kwargs` of one LLMConfig. `pattern_kwargs` are what the serving pattern adds
    (prefill/decode's KV connector); the profile's `engine_args` still override them."""
    kwargs: dict[str, Any] = {"tensor_parallel_size": layout.tensor}
    if layout.pipeline > 1:
        kwargs["pipeline_parallel_size"] = layout.pipeline
    if layout.data > 1:
        kwargs["data_parallel_size"] = layout.data
    if layout.expert and spec.architecture.is_moe:
        kwargs["enable_expert_parallel"] = True
    # An FP8 checkpoint declares its scheme (fp8, compressed-tensors) in its config and vLLM
    # reads it; naming one here would contradict the other. Only online quantization is asked.
    if spec.quantization == "fp8_online":
        kwargs["quantization"] = "fp8"
    if spec.kv_cache_dtype == "fp8" and spec.gpu.has_fp8_math:
        kwargs["kv_cache_dtype"] = "fp8"
    kwargs |= {
        "max_model_len": spec.max_model_len,
        # Chunked prefill: long prompts are cut into max_num_batched_tokens pieces that share
        # each step with running decodes, bounding the inter-token latency they cause.
        "enable_chunked_prefill": True,
        "max_num_batched_tokens": spec.max_num_batched_tokens,
        "max_num_seqs": spec.max_num_seqs,
        "gpu_memory_utilization": spec.gpu_memory_utilization,
        "enable_prefix_caching": spec.prefix_caching,
    }
    if spec.fast_paths.ray_v2_executor:
        # The V2 Ray executor is the one that can overlap scheduling with the GPU step; asking
        # explicitly makes vLLM fail loudly rather than fall back if something forbids it.
        kwargs["async_scheduling"] = True
    kwargs |= lora_engine_kwargs(spec)
    return kwargs | dict(pattern_kwargs or {}) | spec.engine_args
