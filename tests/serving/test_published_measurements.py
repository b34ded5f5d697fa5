"""The planner's roofline estimates against published measurements.

Each row names its source. The tolerance is 25% either way: the estimates are for choosing a
machine and a layout, where a factor of two matters and 25% does not. The planner's efficiency
constants (HBM_EFFICIENCY, PREFILL_MFU, STEP_OVERHEAD_S, ALLREDUCE_LATENCY_S) were fitted once
to these rows; this test keeps them honest when the model changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from serving.planner import choose_machine, decode_step_s, plan
from serving.spec import ModelSpec

TOLERANCE = 0.25

NIM = "NVIDIA NIM LLM benchmarking, Llama-3.3-70B-Instruct 1.8.0, 2xH100 FP8 TP2, concurrency 1"
VLLM_NIGHTLY = (
    "vLLM nightly performance benchmark (Buildkite builds 9555 H100, 9515 H200, 9523 A100): "
    "latency tests, batch 8, 32 in / 128 out, BF16; per step = request latency / 128"
)
TRTLLM = "TensorRT-LLM v0.5 docs/source/performance.md: batch-1 first-token latency, Llama-2-70B"
BLOG = (
    "J. Musgrave, 'vLLM throughput-latency sweep on NVIDIA A100': vLLM, Llama-3.1-8B BF16, "
    "1xA100-40GB, concurrency 1, 1024 in / 128 out, about 75 tokens/s"
)

# Llama-2-70B is not in the catalog; its published config.json, inline.
LLAMA_2_70B: dict[str, Any] = {
    "key": "llama-2-70b",
    "hf_repo": "meta-llama/Llama-2-70b-hf",
    "total_params": 68.98e9,
    "active_params": 68.98e9,
    "num_layers": 80,
    "hidden_size": 8192,
    "num_attention_heads": 64,
    "num_kv_heads": 8,
    "head_dim": 128,
    "intermediate_size": 28672,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
}


@dataclass(frozen=True)
class Measurement:
    source: str
    what: str  # "itl", "ttft" or "decode_step" (ms per step at a batch)
    published_ms: float
    profile: dict[str, Any]
    batch: int = 1
    context: int = 0

    def spec(self) -> ModelSpec:
        return ModelSpec.model_validate(
            {"name": "measured", "source": "org/model", "max_model_len": 4096} | self.profile
        )


def _llama(
    arch: str | dict[str, Any], accelerator: str, tensor: int = 1, **extra: Any
) -> dict[str, Any]:
    return {
        "architecture": arch,
        "accelerator": accelerator,
        "parallelism": {"tensor": tensor},
    } | extra


MEASUREMENTS = [
    Measurement(
        NIM, "itl", 18.91,
        _llama("llama-3.3-70b", "h100-80gb", 2, quantization="fp8",
               workload={"input_tokens": 500, "output_tokens": 2000}, max_model_len=8192),
    ),
    Measurement(
        NIM, "ttft", 47.77,
        _llama("llama-3.3-70b", "h100-80gb", 2, quantization="fp8",
               workload={"input_tokens": 500, "output_tokens": 2000}, max_model_len=8192),
    ),
    Measurement(
        NIM, "ttft", 406.77,
        _llama("llama-3.3-70b", "h100-80gb", 2, quantization="fp8",
               workload={"input_tokens": 5000, "output_tokens": 500}, max_model_len=8192),
    ),
    Measurement(VLLM_NIGHTLY, "decode_step", 997.5 / 128,
                _llama("llama-3.1-8b", "h100-80gb"), batch=8, context=96),
    Measurement(VLLM_NIGHTLY, "decode_step", 2444.5 / 128,
                _llama("llama-3.3-70b", "h100-80gb", 4), batch=8, context=96),
    Measurement(VLLM_NIGHTLY, "decode_step", 833.4 / 128,
                _llama("llama-3.1-8b", "h200-141gb"), batch=8, context=96),
    Measurement(VLLM_NIGHTLY, "decode_step", 2077.5 / 128,
                _llama("llama-3.3-70b", "h200-141gb", 4), batch=8, context=96),
    Measurement(VLLM_NIGHTLY, "decode_step", 1579.3 / 128,
                _llama("llama-3.1-8b", "a100-80gb"), batch=8, context=96),
    Measurement(VLLM_NIGHTLY, "decode_step", 3990.6 / 128,
                _llama("llama-3.3-70b", "a100-80gb", 4), batch=8, context=96),
    Measurement(
        TRTLLM + ", 4xA100 FP16 TP4, 2048 input tokens", "ttft", 377,
        _llama(LLAMA_2_70B, "a100-80gb", 4,
               workload={"input_tokens": 2048, "output_tokens": 1}),
    ),
    Measurement(
        TRTLLM + ", 4xH100 FP8 TP4, 2048 input tokens", "ttft", 109,
        _llama(LLAMA_2_70B, "h100-80gb", 4, quantization="fp8",
               workload={"input_tokens": 2048, "output_tokens": 1}),
    ),
    Measurement(
        BLOG, "itl", 1000 / 75,
        _llama("llama-3.1-8b", "a100-40gb", workload={"input_tokens": 1024, "output_tokens": 128}),
    ),
]  # fmt: skip


def estimate_ms(measurement: Measurement) -> float:
    spec = measurement.spec()
    if measurement.what == "decode_step":
        layout = spec.parallelism
        machine = choose_machine(spec, layout.gpus_per_replica)
        return 1e3 * decode_step_s(spec, machine, layout, measurement.batch, measurement.context)
    model_plan = plan(spec)
    return 1e3 * (model_plan.itl_s if measurement.what == "itl" else model_plan.ttft_s)


def _row_id(measurement: Measurement) -> str:
    arch = measurement.profile["architecture"]
    name = arch if isinstance(arch, str) else arch["key"]
    return f"{name}-{measurement.profile['accelerator']}-{measurement.what}"


@pytest.mark.parametrize("measurement", MEASUREMENTS, ids=[_row_id(m) for m in MEASUREMENTS])
def test_estimate_is_within_tolerance_of_published_measurement(measurement: Measurement) -> None:
    estimated = estimate_ms(measurement)
    error = estimated / measurement.published_ms - 1
    assert abs(error) <= TOLERANCE, (
        f"{measurement.what} estimated {estimated:.1f} ms vs published "
        f"{measurement.published_ms:.1f} ms ({error:+.0%}); source: {measurement.source}"
    )


def test_published_rows_cover_three_gpus_and_both_phases() -> None:
    accelerators = {m.profile["accelerator"] for m in MEASUREMENTS}
    phases = {m.what for m in MEASUREMENTS}
    assert {"h100-80gb", "h200-141gb", "a100-80gb"} <= accelerators
    assert phases == {"itl", "ttft", "decode_step"}
