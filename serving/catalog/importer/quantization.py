"""What a checkpoint's `quantization_config` says its weights are, in the planner's dtypes.

vLLM 0.22 picks its quantization method from this block itself (servestack passes none), so the
planner only needs the bytes a weight takes and the math it runs in:

- `fp8` (block-wise FP8, DeepSeek and Qwen's FP8 releases), `fbgemm_fp8` (Meta's FP8 releases of
  Llama 3.1 405B and Llama 4: per-channel FP8 weights, dynamic FP8 activations) and
  compressed-tensors whose weights are 8-bit floats (W8A8 FP8, llm-compressor's FP8_DYNAMIC and
  FP8_BLOCK schemes): FP8.
- `mxfp4` (gpt-oss): MXFP4 experts, the rest BF16.
- `awq` and `gptq`, and compressed-tensors with 4-bit integer weights (W4A16, Kimi K2
  Thinking's experts): int4 in groups of `group_size`, which vLLM runs through Marlin's W4A16
  kernels (BF16 math); `group_size` -1 (GPTQ and AWQ's per-channel scales, which Marlin also
  runs; compressed-tensors' `channel` strategy) is one scale per row: sized as groups of the
  model's hidden size, the width of most of its matrices' rows (wider rows only lower the
  overhead further).

Anything else (INT8 W8A8, NVFP4, other bit widths, mixed schemes) is refused with the field
named.

The block is found where vLLM looks for it (`ModelArchConfigConvertor.get_quantization_config`
and `weight_utils.get_quant_config`): `quantization_config`, else compressed-tensors' older
`compression_config`, else a multimodal model's `text_config.quantization_config`; and its
`quant_method` is read as vLLM normalizes it (lower case, `compressed_tensors` spelled
`compressed-tensors`). A checkpoint that declares itself anywhere vLLM reads is never sized as
16-bit weights.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from serving.errors import ServestackError

# The planner's (weights, experts) dtypes per quantization method.
DIRECT = {"fp8": ("fp8", None), "fbgemm_fp8": ("fp8", None), "mxfp4": ("bf16", "mxfp4")}
INT4_METHODS = ("awq", "gptq")
MAX_GROUP = 1 << 20
PER_CHANNEL = -1  # GPTQ's and AWQ's group_size for one scale per output channel
SIZED = "fp8, fbgemm_fp8, mxfp4, 4-bit awq and gptq, and compressed-tensors FP8 or W4A16"


def quantization_block(config: Mapping[str, Any]) -> tuple[Any, str] | None:
    """The config's quantization block and its field name, where vLLM finds one (None: the
    checkpoint declares none)."""
    text = config.get("text_config")
    places = [
        (config.get("quantization_config"), "quantization_config"),
        (config.get("compression_config"), "compression_config"),
        (text.get("quantization_config") if isinstance(text, dict) else None,
         "text_config.quantization_config"),
    ]  # fmt: skip
    return next(((block, name) for block, name in places if block is not None), None)


def quant_method(quantization: Any) -> Any:
    """`quant_method` as vLLM reads it: lower case, compressed_tensors as compressed-tensors."""
    method = quantization.get("quant_method") if isinstance(quantization, dict) else None
    if isinstance(method, str):
        return method.lower().replace("compressed_tensors", "compressed-tensors")
    return method


def weight_dtypes(
    quantization: Any, file: str, field: str = "quantization_config", row_width: int = 0
) -> tuple[str, str | None, int | None]:
    """(weights, experts, int4 group size) of a checkpoint whose config has `quantization`
    (read from `field`); `row_width` (the hidden size) is the group of per-channel scales."""
    method = quant_method(quantization)
    if method in DIRECT:
        return (*DIRECT[method], None)
    if method in INT4_METHODS:
        assert isinstance(quantization, dict)
        bits, size = quantization.get("bits"), quantization.get("group_size")
        if size == PER_CHANNEL and row_width > 0:
            size = row_width
        return "int4", None, _int4_group(bits, size, file, f"{field}.")
    if method == "compressed-tensors":
        assert isinstance(quantization, dict)
        dtype, group = _compressed_tensors(quantization, file, field, row_width)
        return dtype, None, group
    if not isinstance(quantization, dict):
        raise ServestackError(
            file, field, f"is {quantization!r}, not an object",
            "pass the checkpoint's published config.json",
        )  # fmt: skip
    problem = "is missing" if method is None else f"is {method!r}"
    raise ServestackError(
        file, f"{field}.quant_method", f"{problem}; servestack sizes {SIZED} checkpoints",
        "use the model's BF16 checkpoint or one of those, or a catalog architecture",
    )  # fmt: skip


def weight_block(quantization: Any, file: str, field: str) -> tuple[int, int] | None:
    """The [rows, columns] blocks an FP8 checkpoint's weights are scaled in, where vLLM reads
    them: `weight_block_size` of an `fp8` block (Fp8Config; absent: one scale per tensor), or
    compressed-tensors' `block_structure` of weights with the `block` strategy (llm-compressor's
    FP8_BLOCK). None for any other scheme."""
    method = quant_method(quantization)
    if not isinstance(quantization, dict):
        return None
    if method == "fp8":
        return _block(quantization.get("weight_block_size"), file, f"{field}.weight_block_size")
    if method != "compressed-tensors" or not isinstance(quantization.get("config_groups"), dict):
        return None
    for name, group in quantization["config_groups"].items():
        weights = group.get("weights") if isinstance(group, dict) else None
        if isinstance(weights, dict) and weights.get("strategy") == "block":
            where = f"{field}.config_groups.{name}.weights.block_structure"
            return _block(weights.get("block_structure"), file, where)
    return None


def _block(value: Any, file: str, field: str) -> tuple[int, int] | None:
    if value is None:
        return None
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) and 0 < v <= MAX_GROUP
                   for v in value)
    ):  # fmt: skip
        raise ServestackError(
            file, field, f"is {value!r}, not two positive block sizes",
            "pass the checkpoint's published config.json (e.g. [128, 128])",
        )  # fmt: skip
    return value[0], value[1]


def _int4_group(bits: Any, group: Any, file: str, prefix: str) -> int:
    if bits != 4:
        raise ServestackError(
            file, f"{prefix}bits", f"is {bits!r}; servestack sizes 4-bit "
            "integer weights", "use the model's 4-bit, FP8 or BF16 checkpoint",
        )  # fmt: skip
    if isinstance(group, bool) or not isinstance(group, int) or not 0 < group <= MAX_GROUP:
        raise ServestackError(
            file, f"{prefix}group_size", f"is {group!r}; servestack sizes "
            "4-bit weights quantized in groups (a positive group_size, or -1 for GPTQ's and "
            "AWQ's per-channel scales)",
            "use a checkpoint quantized in groups, e.g. group_size 128",
        )  # fmt: skip
    return group


def _compressed_tensors(
    quantization: dict[str, Any], file: str, block: str, row_width: int
) -> tuple[str, int | None]:
    """compressed-tensors: every config group's weights must be one scheme. Its W4A16 with the
    `channel` strategy is per-channel scales, as GPTQ's group_size -1."""
    groups = quantization.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        raise ServestackError(
            file, f"{block}.config_groups", "is missing or empty",
            "pass the checkpoint's published config.json",
        )  # fmt: skip
    schemes: set[tuple[str, int | None]] = set()
    for name, group in groups.items():
        weights = group.get("weights") if isinstance(group, dict) else None
        field = f"{block}.config_groups.{name}.weights"
        if not isinstance(weights, dict):
            raise ServestackError(
                file, field, "is missing",
                "pass the checkpoint's published config.json",
            )  # fmt: skip
        kind, bits = weights.get("type"), weights.get("num_bits")
        if kind == "float" and bits == 8:
            schemes.add(("fp8", None))
        elif kind == "int" and bits == 4:
            group = weights.get("group_size")
            if weights.get("strategy") == "channel" and group is None and row_width > 0:
                group = row_width
            schemes.add(("int4", _int4_group(bits, group, file, f"{field}.")))
        else:
            raise ServestackError(
                file, field,
                f"are {bits!r}-bit {kind!r} weights; servestack sizes {SIZED}",
                "use the model's FP8, W4A16 or BF16 checkpoint",
            )  # fmt: skip
    if len(schemes) > 1:
        raise ServestackError(
            file, f"{block}.config_groups", "mixes weight schemes or group sizes",
            "use a checkpoint quantized with one scheme",
        )  # fmt: skip
    return schemes.pop()
