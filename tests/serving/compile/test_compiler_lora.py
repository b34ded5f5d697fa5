"""A profile's adapters compiled into vLLM 0.22's LoRA engine arguments and, off direct streaming,
Ray Serve LLM 2.56.1's `lora_config`, checked with Ray's and vLLM's own models and parsers.

Under direct streaming each adapter is one of vLLM's static `lora_modules`, named as clients name
it and read from the worker pod's mount of the weights bucket, and there is no `lora_config`
(every replica would list its cloud folder at start). Off it, Ray's loader: the loading path is
the folder every adapter is a subfolder of (so /v1/models lists each), Serve's adapters per
replica is vLLM's max_cpu_loras. A profile without adapters compiles as before."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
from pathlib import Path
from typing import Any, get_args

import pytest
import yaml
from compiled_support import compile_spec, llama_8b, model_objects_of
from ray.llm._internal.common.utils.lora_utils import get_base_model_id, get_lora_id
from ray.llm._internal.serve.core.configs.llm_config import LLMConfig
from ray.llm._internal.serve.engines.vllm.vllm_models import VLLMEngineConfig
from ray.serve.config import RequestRouterConfig
from repo import REPO
from vllm.config.lora import LoRAConfig, MaxLoRARanks
from vllm.entrypoints.openai.cli_args import FrontendArgs
from vllm.entrypoints.openai.models.protocol import LoRAModulePath
from vllm.utils.argparse_utils import FlexibleArgumentParser

from serving.compile.routers import ROUTERS
from serving.router.adapters import OTHER_ADAPTER
from serving.spec.loading import load_profile
from serving.spec.lora import MAX_LORA_RANKS, Lora, adapter_model_id
from serving.spec.parts import ADAPTER_AWARE_ROUTERS
from serving.spec.profile import ModelSpec


def load(class_path: str) -> Any:
    module, _, name = class_path.partition(":")
    return getattr(importlib.import_module(module), name)


EXAMPLE = REPO / "stacks" / "models" / "llama-3.1-8b-lora.yaml"


def adapters_spec(
    *, direct_streaming: bool = True, router: str = "servestack_prefix_affinity", **settings: Any
) -> ModelSpec:
    lora = {
        "adapters": [
            {"name": "sql", "source": "gs://team/adapters/sql", "rank": 16},
            {"name": "tone", "source": "gs://team/adapters/tone", "rank": 8},
        ],
        **settings,
    }
    return llama_8b(
        source="gs://team/base",
        lora=lora,
        fast_paths={"direct_streaming": direct_streaming},
        # Ray's own routers cannot see an adapter under direct streaming (lora-routing).
        router=router,
    )


class TestDirectStreaming:
    """The request reaches vLLM's own app: the adapters are vLLM's static modules."""

    def test_no_lora_config_so_no_replica_lists_the_bucket_at_start(self) -> None:
        config = LLMConfig.model_validate(compile_spec(adapters_spec()).llm_config())
        assert config.lora_config is None
        assert config.multiplex_config() is None

    def test_each_adapter_is_a_static_module_named_as_clients_name_it(self) -> None:
        spec = adapters_spec()
        modules = compile_spec(spec).llm_config()["engine_kwargs"]["lora_modules"]
        assert [m["name"] for m in modules] == spec.adapter_model_ids
        assert {m["base_model_name"] for m in modules} == {spec.name}
        for module, ray_id in zip(modules, spec.adapter_model_ids, strict=True):
            assert get_base_model_id(ray_id) == spec.name == module["base_model_name"]

    def test_ray_hands_vllm_every_field_of_its_lora_module_path(self) -> None:
        """Ray passes `lora_modules` to vLLM's frontend as namespaces of the dicts
        (`_dict_to_namespace`), with no defaults filled in: each entry names every field
        `init_static_loras` reads."""
        llm = LLMConfig.model_validate(compile_spec(adapters_spec()).llm_config())
        engine = VLLMEngineConfig.from_llm_config(llm)
        modules = engine.frontend_kwargs["lora_modules"]
        assert "lora_modules" not in engine.engine_kwargs
        FrontendArgs(**engine.frontend_kwargs)
        fields = {field.name for field in dataclasses.fields(LoRAModulePath)}
        for module in modules:
            assert set(module) == fields
            LoRAModulePath(**module)

    def test_vllms_own_parser_reads_each_module_as_compiled(self) -> None:
        modules = compile_spec(adapters_spec()).llm_config()["engine_kwargs"]["lora_modules"]
        parser = FrontendArgs.add_cli_args(FlexibleArgumentParser())
        parsed = parser.parse_args(["--lora-modules", *(json.dumps(m) for m in modules)])
        assert parsed.lora_modules == [LoRAModulePath(**m) for m in modules]

    def test_each_adapter_is_read_from_the_worker_pods_mount_of_its_bucket(self) -> None:
        """The rendered RayService: the worker mounts the weights bucket whole (read-only), and
        each module's path is the adapter's gs:// source under that mount."""
        spec = adapters_spec()
        assert spec.lora is not None
        rayservice = model_objects_of(spec).rayservice["spec"]
        (app,) = yaml.safe_load(rayservice["serveConfigV2"])["applications"]
        (llm,) = app["args"]["llm_configs"]
        (worker,) = rayservice["rayClusterConfig"]["workerGroupSpecs"]
        pod = worker["template"]["spec"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = pod["containers"][0]["volumeMounts"]
        for module, adapter in zip(llm["engine_kwargs"]["lora_modules"], spec.lora.adapters,
                                   strict=True):  # fmt: skip
            (mount,) = [m for m in mounts if module["path"].startswith(m["mountPath"] + "/")]
            assert mount["readOnly"]
            bucket = volumes[mount["name"]]["csi"]["volumeAttributes"]["bucketName"]
            inside = module["path"].removeprefix(mount["mountPath"] + "/")
            assert f"gs://{bucket}/{inside}" == adapter.source


class TestRouterKwargs:
    """servestack's routers are told the engine's adapter cache and the profile's adapters."""

    @pytest.mark.parametrize("kind", sorted(ADAPTER_AWARE_ROUTERS))
    def test_an_adapter_aware_router_takes_the_cache_size_and_the_adapters(self, kind: str) -> None:
        spec = adapters_spec(router=kind, max_loras=2, max_cpu_loras=6)
        assert spec.lora is not None
        deployment = compile_spec(spec).llm_config()["deployment_config"]
        config = RequestRouterConfig(**deployment["request_router_config"])
        kwargs = config.request_router_kwargs
        router_class = load(ROUTERS[spec.router.kind].class_path or "")
        # Named parameters of an initialize_state in the router's classes, not swallowed by a
        # `**_`: a misspelt one would be.
        named = {
            name
            for cls in router_class.__mro__
            if "initialize_state" in vars(cls)
            for name in inspect.signature(vars(cls)["initialize_state"]).parameters
        }
        assert {"adapters_per_replica", "adapters"} <= set(kwargs) <= named
        router = router_class.__new__(router_class)
        router.initialize_state(**kwargs)
        assert router._adapters.per_replica == spec.lora.cpu_loras == 6
        for adapter in spec.lora.adapters:
            assert router._adapter_labels.label(adapter.name) == adapter.name
        assert router._adapter_labels.label("not-in-the-profile") == OTHER_ADAPTER

    def test_rays_router_is_given_no_adapter_arguments(self) -> None:
        spec = adapters_spec(direct_streaming=False, router="prefix_affinity")
        deployment = compile_spec(spec).llm_config()["deployment_config"]
        kwargs = deployment["request_router_config"].get("request_router_kwargs", {})
        assert not {"adapters_per_replica", "adapters"} & set(kwargs)

    def test_a_profile_without_adapters_gives_its_router_none(self) -> None:
        deployment = compile_spec(llama_8b(router="servestack_prefix_affinity")).llm_config()[
            "deployment_config"
        ]
        assert "request_router_kwargs" not in deployment["request_router_config"]


def test_off_direct_streaming_ray_takes_the_lora_config_and_multiplexes_adapters() -> None:
    compiled = compile_spec(adapters_spec(direct_streaming=False, max_loras=2, max_cpu_loras=6))
    assert "lora_modules" not in compiled.llm_config()["engine_kwargs"]
    config = LLMConfig.model_validate(compiled.llm_config())
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


def test_off_direct_streaming_every_adapter_is_where_ray_loads_and_lists_it() -> None:
    """Ray loads '<base>:<adapter>' from '<path>/<lora id>' (lora_serve_utils.py:81) and lists
    '<base>:<subfolder>' in /v1/models: each adapter's source is that folder."""
    spec = adapters_spec(direct_streaming=False)
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
