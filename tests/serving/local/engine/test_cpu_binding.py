"""Each local vLLM engine's threads on CPUs of their own: the binding each engine's slot gets,
the slots and servers a local application hands its LLMConfigs, and the servers themselves."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from compiled_support import compile_spec
from ray.llm._internal.serve.core.server.llm_server import LLMServer
from repo import REPO

from serving.compile.patterns import llm_configs_of
from serving.compile.routers import ROUTERS
from serving.local.engine.cpu_binding import (
    ENGINE_SLOTS,
    bound_server,
    omp_binding,
    parse_slots,
    slot_binding,
)
from serving.local.runtime.app import engine_workers, local_application, local_env
from serving.spec.loading import load_profile
from serving.spec.parts import Autoscaling, Router

MODELS = REPO / "stacks" / "models"
LLAMA = MODELS / "llama-3.1-8b.yaml"


def _class(path: str) -> type:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def test_each_rank_of_a_tensor_parallel_engine_gets_its_own_cpus() -> None:
    assert omp_binding(1, [0, 1]) == "auto"
    assert omp_binding(1, [1], whole_machine=False) == "1"
    assert omp_binding(2, [0, 1]) == "0|1"
    assert omp_binding(2, [0, 1, 2, 3, 4]) == "0,1|2,3"
    assert omp_binding(4, [0, 1]) == "nobind"
    tp2 = load_profile(MODELS / "qwen3-32b.yaml")
    assert engine_workers(compile_spec(tp2)) == 2
    assert local_env(compile_spec(tp2), None, engine="vllm")[
        "VLLM_CPU_OMP_THREADS_BIND"
    ] == omp_binding(2)
    assert local_env(compile_spec(load_profile(LLAMA)), None, engine="vllm")[
        "VLLM_CPU_OMP_THREADS_BIND"
    ] == ("auto")


def test_several_engines_take_the_cpus_in_equal_shares() -> None:
    # vLLM's automatic binding would put every engine on core 0: each slot names its own.
    assert [slot_binding(1, slot, 2, [0, 1]) for slot in range(2)] == ["0", "1"]
    assert [slot_binding(1, slot, 3, list(range(7))) for slot in range(3)] == ["0,1", "2,3", "4,5"]
    assert slot_binding(2, 1, 2, [0, 1, 2, 3]) == "2|3"
    # Fewer CPUs than engines: one CPU each, in turn; a scaled-up replica wraps around.
    assert [slot_binding(1, slot, 4, [0, 1]) for slot in range(4)] == ["0", "1", "0", "1"]
    assert slot_binding(1, 2, 2, [0, 1]) == "0"
    assert slot_binding(2, 0, 2, [0, 1]) == "nobind"
    # One engine alone keeps vLLM's own choice.
    assert slot_binding(1, 0, 1, [0, 1]) == "auto"


@pytest.mark.parametrize("value", ["", "0", "-1", "a", "0/2", "1.5"])
def test_a_malformed_slot_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match=ENGINE_SLOTS):
        parse_slots(value)
    assert parse_slots("2") == 2


def test_every_server_the_compiler_can_name_has_a_local_counterpart_that_extends_it() -> None:
    named = {router.server_class for router in ROUTERS.values()}
    assert len(named) >= 2
    for name in named:
        original = LLMServer if name is None else _class(name)
        assert issubclass(_class(bound_server(name)), original), name
    with pytest.raises(ValueError, match="no local counterpart"):
        bound_server("somewhere:NewServer")


def _configs(spec_path: Path, replicas: int | None = None, router: str | None = None) -> list:
    spec = load_profile(spec_path)
    update: dict[str, object] = {}
    if replicas is not None:
        update["autoscaling"] = Autoscaling(min_replicas=replicas, max_replicas=replicas)
    if router is not None:
        update["router"] = Router(kind=router)
    app = local_application(compile_spec(spec.model_copy(update=update)), "vllm", Path("/m"))
    return [config for _, config in llm_configs_of(app["args"])]


def test_a_local_application_numbers_its_engines_and_binds_each() -> None:
    (two,) = _configs(LLAMA, replicas=2, router="servestack_precise_prefix")
    assert two["server_cls"] == bound_server(ROUTERS["servestack_precise_prefix"].server_class)
    assert two["runtime_env"]["env_vars"][ENGINE_SLOTS] == "2"
    # Prefill/decode's builder makes its own server classes: it is left to vLLM's binding.
    for config in _configs(MODELS / "llama-3.1-8b-pd.yaml"):
        assert "server_cls" not in config
        assert ENGINE_SLOTS not in config.get("runtime_env", {}).get("env_vars", {})


def test_one_engine_keeps_the_compiled_server_and_vllms_own_binding() -> None:
    (one,) = _configs(LLAMA, replicas=1, router="servestack_precise_prefix")
    assert one["server_cls"] == ROUTERS["servestack_precise_prefix"].server_class
    assert ENGINE_SLOTS not in one.get("runtime_env", {}).get("env_vars", {})
