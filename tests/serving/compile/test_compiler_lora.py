"""A profile's adapters compiled into Ray Serve LLM 2.56.1's `lora_config` and vLLM 0.22's LoRA
engine arguments, checked with Ray's and vLLM's own models: the loading path is the folder every
adapter is a subfolder of (so /v1/models lists each), Serve's adapters per replica is vLLM's
max_cpu_loras, and a profile without adapters compiles as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

import pytest
from compiled_support import compile_spec, llama_8b
from ray.llm._internal.common.utils.lora_utils import get_base_model_id, get_lora_id
from ray.llm._internal.serve.core.configs.llm_config import LLMConfig
from ray.llm._internal.serve.engines.vllm.vllm_models import VLLMEngineConfig
from repo import REPO
from vllm.config.lora import LoRAConfig, MaxLoRARanks

from serving.spec.loading import load_profile
from serving.spec.lora import MAX_LORA_RANKS, Lora, adapter_model_id
from serving.spec.profile import ModelSpec

EXAMPLE = REPO / "stacks" / "models" / "llama-3.1-8b-lora.yaml"


def adapters_spec(**settings: Any) -> ModelSpec:
    lora = {
        "adapters": [
            {"name": "sql", "source": "gs://team/adapters/sql", "rank": 16},
            {"name": "tone", "source": "gs://team/adapters/tone", "rank": 8},
        ],
        **settings,
    }
    return llama_8b(source="gs://team/base", lora=lora)


def test_ray_takes_the_lora_config_and_serves_multiplexed_adapters() -> None:
    config = LLMConfig.model_validate(
        compile_spec(adapters_spec(max_loras=2, max_cpu_loras=6)).llm_config()
    )
    assert config.lora_config is not None
    assert config.lora_config.dynamic_lora_loading_path == "gs://team/adapters"
    multiplex = config.multiplex_config()
    assert multiplex is not None and multiplex.max_num_models_per_replica == 6


def test_vllm_takes_the_lora_engine_arguments() -> None:
    arguments = compile_spec(adapters_spec(max_loras=2, max_cpu_loras=6, max_lora_rank=32))
    engine = VLLMEngineConfig.from_llm_config(LLMConfig.model_validate(arguments.llm_config()))
    kwargs = engine.engine_kwargs
    assert (kwargs["enable_lora"], kwargs["max_loras"], kwargs["max_lora_rank"]) == (True, 2, 32)
    # vLLM's own LoRAConfig accepts them (rank among its kernels', CPU cache >= GPU slots).
    vllm_config = LoRAConfig(
        max_loras=kwargs["max_loras"],
        max_lora_rank=kwargs["max_lora_rank"],
        max_cpu_loras=kwargs["max_cpu_loras"],
    )
    assert vllm_config.max_cpu_loras == 6


def test_every_adapter_is_where_ray_loads_and_lists_it() -> None:
    """Ray loads '<base>:<adapter>' from '<path>/<lora id>' (lora_serve_utils.py:81) and lists
    '<base>:<subfolder>' in /v1/models: each adapter's source is that folder."""
    spec = adapters_spec()
    assert spec.lora is not None
    config = compile_spec(spec).llm_config()
    path = config["lora_config"]["dynamic_lora_loading_path"]
    base = config["model_loading_config"]["model_id"]
    for adapter in spec.lora.adapters:
        model_id = adapter_model_id(spec.name, adapter.name)
        assert get_base_model_id(model_id) == base
        assert f"{path}/{get_lora_id(model_id)}" == adapter.source


def test_the_ranks_and_default_are_vllms() -> None:
    assert get_args(MaxLoRARanks) == MAX_LORA_RANKS
    assert Lora.model_fields["max_lora_rank"].default == LoRAConfig().max_lora_rank
    assert Lora.model_fields["max_loras"].default == LoRAConfig().max_loras


def test_a_profile_without_adapters_asks_no_lora() -> None:
    config = compile_spec(llama_8b()).llm_config()
    assert "lora_config" not in config
    assert not any("lora" in key for key in config["engine_kwargs"])


@pytest.mark.parametrize("path", [EXAMPLE], ids=lambda p: Path(p).stem)
def test_the_shipped_example_serves_two_adapters_and_plans_clean(path: Path) -> None:
    spec = load_profile(path)
    compiled = compile_spec(spec)
    assert compiled.plan.ok, compiled.plan.verdicts
    assert spec.lora is not None and len(spec.lora.adapters) == 2
    assert compiled.plan.groups[0].memory.lora_bytes > 0
    LLMConfig.model_validate(compiled.llm_config())
