"""A checkpoint's `model.safetensors.index.json` against the shapes of its config.

The index lists every tensor (`weight_map`, name -> shard) and the bytes of them all
(`metadata.total_size`); checkpoints saved by recent transformers also give
`metadata.total_parameters`. The layers it names must be the config's (more are allowed: the
multi-token-prediction layers DeepSeek-style checkpoints ship and vLLM serves only for
speculative decoding), and its size must be what the shapes weigh in the published dtypes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from serving.catalog.importer.reading import JsonFile, check_int
from serving.catalog.models import MAX_PARAMS
from serving.errors import ServestackError

_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")
# Tensors of an image encoder or its projector (their own `layers.N` are not the LM's).
_VISION = re.compile(r"vision|multi_modal_projector|visual")
# A 16-bit checkpoint weighs two bytes a parameter; quantized ones (FP8 with block scales,
# MXFP4) differ from the shapes' estimate by their scales and what stays 16-bit. A size
# outside this band of the estimate is not these shapes.
SIZE_BAND = (0.9, 1.25)
PARAMETER_TOLERANCE = 0.02


@dataclass(frozen=True)
class IndexFacts:
    total_bytes: int
    total_parameters: int | None  # exact, where the index says it or the dtype implies it
    layers: int  # language-model layers named in weight_map
    tensors: int


def read_index(index: JsonFile, sixteen_bit: bool) -> IndexFacts:
    data = index.data
    metadata = data.get("metadata")
    if not isinstance(metadata, dict):
        raise ServestackError(
            index.file, "metadata", "is missing", "pass the checkpoint's own index file"
        )  # fmt: skip
    # A parameter is at most 4 bytes (float32) in any checkpoint.
    largest = int(4 * MAX_PARAMS)
    total_bytes = check_int(
        metadata.get("total_size"), index.file, "metadata.total_size", maximum=largest
    )
    weight_map = data.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise ServestackError(
            index.file, "weight_map", "is missing or empty", "pass the checkpoint's own index"
        )  # fmt: skip
    if not all(isinstance(shard, str) for shard in weight_map.values()):
        raise ServestackError(
            index.file, "weight_map", "maps a tensor to something other than a file name",
            "pass the checkpoint's own index",
        )  # fmt: skip
    layer_ids = {
        int(found[1])
        for name in weight_map
        if not _VISION.search(name) and (found := _LAYER.search(name))
    }
    exact: Any = metadata.get("total_parameters")
    if exact is not None:
        exact = check_int(exact, index.file, "metadata.total_parameters", maximum=largest)
    elif sixteen_bit:
        exact = total_bytes // 2
    return IndexFacts(total_bytes, exact, max(layer_ids) + 1 if layer_ids else 0, len(weight_map))


def checked_total(
    facts: IndexFacts, index: JsonFile, layers: int, shape_total: int, shape_bytes: float
) -> int:
    """The parameter count, exact from the index where it can be, after checking that the index
    and the config describe the same model."""
    if facts.layers < layers:
        raise ServestackError(
            index.file, "weight_map", f"names {facts.layers} layers; config.json has {layers}",
            "pass the index of the same checkpoint as the config",
        )  # fmt: skip
    low, high = SIZE_BAND
    if not low * shape_bytes <= facts.total_bytes <= high * shape_bytes:
        raise ServestackError(
            index.file, "metadata.total_size",
            f"is {facts.total_bytes:,} bytes; config.json's shapes weigh about "
            f"{shape_bytes:,.0f} in its dtypes",
            "pass the index of the same checkpoint as the config",
        )  # fmt: skip
    # Extra layers (multi-token prediction) are in the index's count but not in what vLLM
    # serves: the shapes' count stays.
    if facts.total_parameters is None or facts.layers > layers:
        return shape_total
    if abs(facts.total_parameters / shape_total - 1) > PARAMETER_TOLERANCE:
        raise ServestackError(
            index.file, "metadata",
            f"says {facts.total_parameters:,} parameters; config.json's shapes have "
            f"{shape_total:,}", "pass the index of the same checkpoint as the config",
        )  # fmt: skip
    return facts.total_parameters
