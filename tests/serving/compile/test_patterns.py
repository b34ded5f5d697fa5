"""One serving pattern per spec, each with Ray's own public builder: the pattern a profile takes,
its builder as the application's import path, and its LLMConfigs found again in the args."""

from __future__ import annotations

from pathlib import Path

import pytest
from compiled_support import SHIPPED_PROFILES, compile_spec, llama_8b

from serving.compile.patterns import (
    BUILD_DP_OPENAI_APP,
    BUILD_OPENAI_APP,
    BUILD_PD_OPENAI_APP,
    PATTERNS,
    llm_configs_of,
    pattern_for,
)
from serving.spec.loading import load_profile
from serving.spec.profile import ModelSpec

SPECS = {
    "single": lambda: llama_8b(),
    "data_parallel": lambda: llama_8b(
        name="qwen3-30b-a3b",
        source="Qwen/Qwen3-30B-A3B",
        architecture="qwen3-30b-a3b",
        parallelism={"tensor": 1, "data": 8, "expert": True},
    ),
    "prefill_decode": lambda: llama_8b(disaggregation={}),
}
BUILDERS = {
    "single": BUILD_OPENAI_APP,
    "data_parallel": BUILD_DP_OPENAI_APP,
    "prefill_decode": BUILD_PD_OPENAI_APP,
}


@pytest.mark.parametrize("name", list(SPECS))
def test_the_spec_takes_its_pattern_and_that_patterns_ray_builder(name: str) -> None:
    spec: ModelSpec = SPECS[name]()
    assert [p.name for p in PATTERNS if p.serves(spec)] == [name]
    assert pattern_for(spec).import_path == BUILDERS[name]
    assert compile_spec(spec).application["import_path"] == BUILDERS[name]


@pytest.mark.parametrize("path", SHIPPED_PROFILES, ids=lambda p: p.stem)
def test_exactly_one_pattern_serves_each_shipped_profile(path: Path) -> None:
    spec = load_profile(path)
    assert len([p for p in PATTERNS if p.serves(spec)]) == 1


@pytest.mark.parametrize("name", list(SPECS))
def test_llm_configs_of_finds_the_args_own_llm_configs_one_per_planned_group(name: str) -> None:
    compiled = compile_spec(SPECS[name]())
    args = compiled.application["args"]
    found = llm_configs_of(args)
    assert [role for role, _ in found] == [g.role for g in compiled.plan.groups]
    owned = [id(v) for v in args.values() if isinstance(v, dict)]
    owned += [id(c) for c in args.get("llm_configs", [])]
    assert sorted(id(config) for _, config in found) == sorted(owned)


def test_each_pd_side_has_its_own_kv_connector_object() -> None:
    """A dict shared by both sides would be written as a YAML anchor and alias."""
    compiled = compile_spec(SPECS["prefill_decode"]())
    prefill = compiled.llm_config("prefill")["engine_kwargs"]["kv_transfer_config"]
    decode = compiled.llm_config("decode")["engine_kwargs"]["kv_transfer_config"]
    assert prefill == decode == {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
    assert prefill is not decode
