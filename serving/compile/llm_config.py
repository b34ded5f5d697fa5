"""One LLMConfig, as the keyword arguments of Ray's `LLMConfig` model: what the model is and
where its weights are, vLLM's engine arguments, the placement group that keeps a replica's ranks
together, and the Serve deployment's options (replica bounds, autoscaling, the request router).

Every LLMConfig describes one replica group of the plan; the serving patterns
(`serving.compile.patterns`) decide how many there are and how Ray's builder takes them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from serving.compile.autoscaling import derive
from serving.compile.engine import engine_kwargs
from serving.compile.lora import lora_config, lora_router_kwargs
from serving.compile.routers import RAY_DEFAULT_ROUTER_CLASS, ROUTER_CLASSES, ROUTERS
from serving.compile.weights import model_source
from serving.plan.planner import GroupPlan
from serving.spec.profile import ModelSpec

# How often Serve checks whether a stopping replica's requests have ended.
GRACEFUL_SHUTDOWN_POLL_S = 1
# Logical CPUs per vLLM worker bundle (the GPU worker process and its tokenizer threads).
CPUS_PER_GPU_WORKER = 1


def placement_strategy(spec: ModelSpec, group: GroupPlan) -> str:
    """STRICT_PACK keeps a replica's tensor-parallel ranks on one node, where NVLink joins them;
    Ray's default (PACK since ray#56980) would let them spill across nodes without a word. Only
    pipeline stages that cannot share a node get PACK."""
    if spec.placement != "auto":
        return spec.placement
    inside = group.parallelism.model_parallel_size <= group.placement.gpus_per_node
    return "STRICT_PACK" if inside else "PACK"


def deployment_config(
    spec: ModelSpec, group: GroupPlan, *, graceful_shutdown_s: int | None = None
) -> dict[str, Any]:
    """Serve's options for one deployment. `graceful_shutdown_s` is how long a stopping replica
    may finish its requests: the platform knows it (the notice its nodes give); unset, Ray's
    default (20 s)."""
    bounds = group.replica_group
    knobs = derive(spec, group)
    config: dict[str, Any] = {
        # For DP deployments Ray counts DP groups here and multiplies by data_parallel_size.
        "autoscaling_config": {
            "min_replicas": bounds.min_replicas,
            "max_replicas": bounds.max_replicas,
            "target_ongoing_requests": knobs.target_ongoing_requests,
            "upscale_delay_s": knobs.upscale_delay_s,
            "downscale_delay_s": knobs.downscale_delay_s,
        },
        "max_ongoing_requests": knobs.max_ongoing_requests,
    }
    if graceful_shutdown_s is not None:
        config["graceful_shutdown_timeout_s"] = graceful_shutdown_s
        # Serve polls a stopping replica for requests still running; every second, so a
        # replica whose last stream ended leaves within a second, not Ray's 2 s.
        config["graceful_shutdown_wait_loop_s"] = GRACEFUL_SHUTDOWN_POLL_S
    router_class = ROUTER_CLASSES[spec.router.kind]
    if router_class is None and spec.fast_paths.direct_streaming:
        # Ray 2.56's direct-streaming builder puts RoundRobinRouter on a deployment that names
        # no router; power of two has to be asked for by name there.
        router_class = RAY_DEFAULT_ROUTER_CLASS
    if router_class is not None:
        config["request_router_config"] = {"request_router_class": router_class}
        router_kwargs = spec.router.affinity_kwargs() | lora_router_kwargs(spec)
        if router_kwargs:
            config["request_router_config"]["request_router_kwargs"] = router_kwargs
        period = ROUTERS[spec.router.kind].stats_period_s
        if period is not None:
            config["request_router_config"]["request_routing_stats_period_s"] = period
    return config


def llm_config(
    spec: ModelSpec,
    group: GroupPlan,
    *,
    pattern_kwargs: Mapping[str, Any] | None = None,
    graceful_shutdown_s: int | None = None,
) -> dict[str, Any]:
    """The LLMConfig of one planned replica group. `pattern_kwargs`: engine arguments the
    serving pattern adds (see `engine_kwargs`)."""
    config: dict[str, Any] = {
        "model_loading_config": {"model_id": spec.name, "model_source": model_source(spec)},
        "accelerator_type": spec.gpu.ray_accelerator_type,
        "engine_kwargs": engine_kwargs(spec, group.parallelism, pattern_kwargs),
        "placement_group_config": {
            "bundle_per_worker": {"CPU": CPUS_PER_GPU_WORKER, "GPU": 1},
            "strategy": placement_strategy(spec, group),
        },
        "deployment_config": deployment_config(
            spec, group, graceful_shutdown_s=graceful_shutdown_s
        ),
        # vLLM's own metrics (TTFT, inter-token latency, queue, KV cache, prefix-cache hits)
        # through Ray's metrics export, which the cluster scrapes. On by default in Ray 2.56.1;
        # said here so that a Ray whose default changes cannot silently blind the dashboard.
        "log_engine_metrics": True,
    }
    adapters = lora_config(spec)
    if adapters is not None:
        config["lora_config"] = adapters
    server_class = ROUTERS[spec.router.kind].server_class
    if server_class is not None:
        config["server_cls"] = server_class
    if spec.env:
        config["runtime_env"] = {"env_vars": dict(spec.env)}
    return config
