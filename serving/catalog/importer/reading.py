"""Reading a model's JSON files safely, and its fields as the numbers they must be.

A config.json is data from outside: it is read with a size and nesting limit, duplicate keys
and NaN/Infinity are refused, and every shape the importer uses must be a whole number in a
sane range. Each refusal names the file and the field.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from serving.catalog.models import MAX_DIMENSION
from serving.errors import ServestackError

CONFIG_FILE = "config.json"
INDEX_FILE = "model.safetensors.index.json"
# Published configs are a few kB; the largest indexes (a weight_map over every tensor of a
# 1T-parameter checkpoint) are about 10 MB.
MAX_CONFIG_BYTES = 1 << 20
MAX_INDEX_BYTES = 64 << 20
# A config nests text_config/vision_config and their rope_scaling: four levels. Ten is generous.
MAX_NESTING = 10


@dataclass(frozen=True)
class JsonFile:
    """A parsed JSON object and where it came from."""

    data: dict[str, Any]
    file: str
    sha256: str


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"the key '{key}' appears twice")
        seen[key] = value
    return seen


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _depth(value: Any) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, level + 1) for child in children if isinstance(child, dict | list))
    return deepest


def _too_big(size: int, file: str, limit: int) -> ServestackError:
    return ServestackError(
        file, "", f"is {size:,} bytes, more than the {limit:,} a model's JSON needs",
        f"pass the model's own {Path(file).name} from its Hugging Face repo",
    )  # fmt: skip


def parse_json(raw: bytes, file: str, limit: int = MAX_CONFIG_BYTES) -> JsonFile:
    """One JSON object from `raw`, or a ServestackError naming `file`."""
    if len(raw) > limit:
        raise _too_big(len(raw), file, limit)
    try:
        data = json.loads(
            raw.decode("utf-8"),
            object_pairs_hook=_refuse_duplicates,
            parse_constant=_refuse_constant,
        )
    except UnicodeDecodeError as exc:
        raise ServestackError(
            file, "", f"is not UTF-8 (byte {exc.start})", "save it as UTF-8 JSON"
        ) from None
    except RecursionError:
        raise ServestackError(
            file, "", "nests deeper than any model config", "pass the model's own JSON"
        ) from None
    except ValueError as exc:
        raise ServestackError(file, "", f"is not valid JSON: {exc}", "fix the JSON") from None
    if not isinstance(data, dict):
        raise ServestackError(
            file, "", f"holds a JSON {type(data).__name__}, not an object", "pass the model's JSON"
        )  # fmt: skip
    if _depth(data) > MAX_NESTING:
        raise ServestackError(
            file, "", f"nests more than {MAX_NESTING} levels deep", "pass the model's own JSON"
        )  # fmt: skip
    return JsonFile(data, file, hashlib.sha256(raw).hexdigest())


def read_json(path: Path, file: str, limit: int = MAX_CONFIG_BYTES) -> JsonFile:
    try:
        size = path.stat().st_size
        if size > limit:  # refused before it is read
            raise _too_big(size, file, limit)
        raw = path.read_bytes()
    except OSError as exc:
        raise ServestackError(
            file, "", f"cannot be read ({exc.strerror})", "pass a readable config.json"
        ) from None
    return parse_json(raw, file, limit)


@dataclass(frozen=True)
class ModelFiles:
    """A model's config.json and, where it has one, its safetensors index."""

    config: JsonFile
    index: JsonFile | None


def read_model_files(path: Path, shown: str | None = None) -> ModelFiles:
    """`path` is a config.json, or a folder holding config.json (and maybe the index)."""
    shown = shown or str(path)
    if path.is_dir():
        config_path = path / CONFIG_FILE
        if not config_path.is_file():
            raise ServestackError(
                shown, "", f"holds no {CONFIG_FILE}",
                f"pass the model's {CONFIG_FILE}, or a folder holding it",
            )  # fmt: skip
        index_path = path / INDEX_FILE
        config = read_json(config_path, f"{shown.rstrip('/')}/{CONFIG_FILE}")
        index = (
            read_json(index_path, f"{shown.rstrip('/')}/{INDEX_FILE}", MAX_INDEX_BYTES)
            if index_path.is_file()
            else None
        )
        return ModelFiles(config, index)
    if not path.is_file():
        raise ServestackError(
            shown, "", "does not exist", f"pass the model's {CONFIG_FILE}, or a folder holding it"
        )  # fmt: skip
    return ModelFiles(read_json(path, shown), None)


class Fields:
    """The shape fields of one config (its top level, or a nested `text_config`), read as whole
    numbers in range. `values` is the transformers config object with the class's defaults;
    `given` what the file itself sets at this level."""

    def __init__(
        self, values: Any, file: str, prefix: str = "", given: Mapping[str, Any] | None = None
    ) -> None:
        self.values = values
        self.file = file
        self.prefix = prefix
        self.given = given or {}

    def field(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def refuse(self, name: str, problem: str, fix: str) -> ServestackError:
        return ServestackError(self.file, self.field(name), problem, fix)

    def raw(self, name: str) -> Any:
        return getattr(self.values, name, None)

    def whole(self, name: str, minimum: int = 1) -> int:
        value = self.raw(name)
        if value is None:
            raise self.refuse(
                name, "is missing, and transformers' config class has no default for it",
                f"set {self.field(name)} as the model's published config.json does",
            )  # fmt: skip
        return check_int(value, self.file, self.field(name), minimum)

    def head_dim(self) -> int:
        """head_dim as the class has it (set, defaulted, or hidden_size // heads). Where the file
        leaves it to be derived, the heads must divide the width: the classes floor the
        division silently, and such a model is a typo, not a design."""
        hidden, heads = self.whole("hidden_size"), self.whole("num_attention_heads")
        explicit = self.optional_int("head_dim")
        derived = "head_dim" not in self.given and explicit in (None, hidden // heads)
        if explicit is not None and not derived:
            return explicit
        if hidden % heads:
            raise self.refuse(
                "num_attention_heads", f"{heads} heads do not divide hidden_size {hidden:,}",
                "set head_dim, or a head count that divides the width",
            )  # fmt: skip
        return hidden // heads

    def kv_heads(self) -> int:
        heads = self.whole("num_attention_heads")
        kv_heads = self.optional_int("num_key_value_heads") or heads
        if heads % kv_heads:
            raise self.refuse(
                "num_key_value_heads", f"{kv_heads} KV heads do not divide {heads} query heads",
                "use a KV head count that divides num_attention_heads",
            )  # fmt: skip
        return kv_heads

    def optional_int(self, name: str, minimum: int = 1) -> int | None:
        value = self.raw(name)
        return None if value is None else check_int(value, self.file, self.field(name), minimum)

    def flag(self, name: str) -> bool:
        value = self.raw(name)
        if value is None:
            return False
        if not isinstance(value, bool):
            raise self.refuse(name, f"is {value!r}, not true or false", "use true or false")
        return value

    def int_list(self, name: str, minimum: int = 0) -> list[int] | None:
        value = self.raw(name)
        if value is None:
            return None
        if not isinstance(value, list | tuple):
            raise self.refuse(name, f"is {value!r}, not a list", "use a list of whole numbers")
        return [check_int(item, self.file, self.field(name), minimum) for item in value]


def check_int(
    value: Any, file: str, field: str, minimum: int = 1, maximum: int = MAX_DIMENSION
) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ServestackError(
            file, field, f"is {value!r}, not a whole number", "use the published whole number"
        )  # fmt: skip
    if not minimum <= value <= maximum:
        raise ServestackError(
            file, field, f"is {value:,}, outside {minimum} to {maximum:,}",
            "use the model's published value",
        )  # fmt: skip
    return value


def check_shape_fields(config: Mapping[str, Any], file: str, prefix: str = "") -> None:
    """Before transformers sees them: the shape fields a file sets are whole numbers in range
    (transformers' classes take "4096" or -1 and fail later, or not at all)."""
    for name, value in config.items():
        if name in SHAPE_FIELDS and value is not None:
            check_int(value, file, f"{prefix}{name}", SHAPE_FIELDS[name])
        elif name in ("text_config", "vision_config") and isinstance(value, dict):
            check_shape_fields(value, file, f"{prefix}{name}.")


# The fields the importer reads, and the least each may be (counts may be 0, widths may not).
SHAPE_FIELDS: dict[str, int] = {
    **dict.fromkeys(
        (
            "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
            "head_dim", "intermediate_size", "moe_intermediate_size", "vocab_size",
            "max_position_embeddings", "kv_lora_rank", "q_lora_rank",
            "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "sliding_window",
            "attention_chunk_size", "linear_num_key_heads", "linear_num_value_heads",
            "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim",
            "intermediate_size_mlp", "decoder_sparse_step",
            "interleave_moe_layer_step", "moe_layer_freq", "full_attention_interval",
            "sliding_window_pattern", "image_size", "patch_size", "num_channels",
            "projector_input_dim", "projector_output_dim", "vision_output_dim", "index_topk",
        ),
        1,
    ),
    # Counts where 0 means none, as published configs write them: a dense model's "num_experts":
    # 0, Qwen3 MoE's "shared_expert_intermediate_size": 0 (Qwen3-Coder-480B-A35B-Instruct).
    **dict.fromkeys(
        (
            "n_shared_experts", "first_k_dense_replace", "num_nextn_predict_layers",
            "num_local_experts", "num_experts", "n_routed_experts", "num_experts_per_tok",
            "experts_per_token", "shared_expert_intermediate_size", "n_group", "topk_group",
        ),
        0,
    ),
}  # fmt: skip
