"""The compiler: one planned model spec into what Ray Serve LLM 2.56 and KubeRay run.

`compile(spec, plan)` returns a `CompiledModel`, the one object every later stage reads:
- `serve_config`: the `serveConfigV2` document, one application built by one of Ray's public
  builders; the only code of ours the cluster runs is servestack's request router, where the
  profile names it (`serving.compile.routers`);
- `cluster_env`: the fast-path variables for the Ray head and every worker container;
- `worker_shapes`: the GPU worker pods one model needs, per machine type.

Machine, placement and replica groups come from the plan, never worked out again; infra turns
the result into Kubernetes objects and policies judge those objects with the planner's rules.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic import Field

from serving import catalog
from serving.catalog import GIB
from serving.catalog.fast_paths import FAST_PATHS, FORWARD_BODY_VARIABLE
from serving.compile.autoscaling import autoscaling
from serving.compile.routers import (
    BODY_AWARE_ROUTERS,
    RAY_DEFAULT_ROUTER_CLASS,
    ROUTER_CLASSES,
    ROUTERS,
)
from serving.frozen import Frozen
from serving.plan.placement import nodes_for
from serving.plan.planner import GroupPlan, Plan
from serving.plan.replicas import Role
from serving.spec.parts import Parallelism
from serving.spec.profile import GCS_SCHEME, ModelSpec

# The annotation carrying the model profile a RayService was compiled from: policies rebuild the
# spec from it and overlay the layout the resource actually deploys.
PROFILE_ANNOTATION = "servestack.io/profile"

BUILD_OPENAI_APP = "ray.serve.llm:build_openai_app"
BUILD_DP_OPENAI_APP = "ray.serve.llm:build_dp_openai_app"
BUILD_PD_OPENAI_APP = "ray.serve.llm:build_pd_openai_app"

# How often Serve checks whether a stopping replica's requests have ended.
GRACEFUL_SHUTDOWN_POLL_S = 1
# Logical CPUs per vLLM worker bundle (the GPU worker process and its tokenizer threads).
CPUS_PER_GPU_WORKER = 1

# Where a gs:// bucket of weights is mounted in worker pods (GCS FUSE, read-only).
MODEL_MOUNT_ROOT = "/mnt/models"

# Ray's object store lives in /dev/shm; LLM serving passes small objects (weights come from disk),
# so a tenth of the pod is plenty. NCCL and vLLM's message queues take a little more per GPU.
OBJECT_STORE_FRACTION = 0.1
OBJECT_STORE_MAX_BYTES = 32 * GIB
SHM_PER_GPU_BYTES = 2 * GIB


def _flag(on: bool) -> str:
    return "1" if on else "0"


# --- the environment ------------------------------------------------------------------------


def forwards_body(spec: ModelSpec) -> bool:
    """HAProxy must forward the request body to the router exactly when a prompt-reading router
    sits behind direct streaming (the only path where HAProxy consults a router)."""
    return spec.fast_paths.direct_streaming and spec.router.kind in BODY_AWARE_ROUTERS


def cluster_env(spec: ModelSpec) -> dict[str, str]:
    """Variables for the Ray head and every worker container.

    Ray reads them when its processes start (the HAProxy proxy, the builder on the head, each
    replica), so they belong in the pod spec, not in an application's runtime_env. A fast path
    turned off is written as "0": vLLM 0.22 turns the V2 executor on when the variable is unset.
    """
    env = {path.variable: _flag(getattr(spec.fast_paths, path.field)) for path in FAST_PATHS}
    if forwards_body(spec):
        env[FORWARD_BODY_VARIABLE] = "1"
    return env


# --- the Serve application ------------------------------------------------------------------


def builder(spec: ModelSpec) -> str:
    """Ray's builder for the spec: P/D pairs, DP+EP groups, or one LLM deployment."""
    if spec.disaggregation is not None:
        return BUILD_PD_OPENAI_APP
    if spec.parallelism.data > 1:
        return BUILD_DP_OPENAI_APP
    return BUILD_OPENAI_APP


def gcs_weights(spec: ModelSpec) -> tuple[str, str] | None:
    """(bucket, object prefix) when the weights are on GCS, else None (Hugging Face)."""
    if not spec.weights_on_gcs:
        return None
    bucket, _, prefix = spec.source.removeprefix(GCS_SCHEME).partition("/")
    return bucket, prefix.strip("/")


def model_source(spec: ModelSpec) -> str:
    """What vLLM loads: the Hugging Face repo, or the weights' path under the GCS FUSE mount."""
    weights = gcs_weights(spec)
    if weights is None:
        return spec.source
    bucket, prefix = weights
    return f"{MODEL_MOUNT_ROOT}/{bucket}/{prefix}".rstrip("/")


def placement_strategy(spec: ModelSpec, group: GroupPlan) -> str:
    """STRICT_PACK keeps a replica's tensor-parallel ranks on one node, where NVLink joins them;
    Ray's default (PACK since ray#56980) would let them spill across nodes without a word. Only
    pipeline stages that cannot share a node get PACK."""
    if spec.placement != "auto":
        return spec.placement
    inside = group.parallelism.model_parallel_size <= group.placement.gpus_per_node
    return "STRICT_PACK" if inside else "PACK"


def engine_kwargs(spec: ModelSpec, layout: Parallelism, role: Role) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"tensor_parallel_size": layout.tensor}
    if layout.pipeline > 1:
        kwargs["pipeline_parallel_size"] = layout.pipeline
    if layout.data > 1:
        kwargs["data_parallel_size"] = layout.data
    if layout.expert and spec.architecture.is_moe:
        kwargs["enable_expert_parallel"] = True
    # An FP8 checkpoint declares its scheme (fp8, compressed-tensors) in its config and vLLM
    # reads it; naming one here would contradict the other. Only online quantization is asked.
    if spec.quantization == "fp8_online":
        kwargs["quantization"] = "fp8"
    if spec.kv_cache_dtype == "fp8" and spec.gpu.has_fp8_math:
        kwargs["kv_cache_dtype"] = "fp8"
    kwargs |= {
        "max_model_len": spec.max_model_len,
        # Chunked prefill: long prompts are cut into max_num_batched_tokens pieces that share
        # each step with running decodes, bounding the inter-token latency they cause.
        "enable_chunked_prefill": True,
        "max_num_batched_tokens": spec.max_num_batched_tokens,
        "max_num_seqs": spec.max_num_seqs,
        "gpu_memory_utilization": spec.gpu_memory_utilization,
        "enable_prefix_caching": spec.prefix_caching,
    }
    if spec.fast_paths.ray_v2_executor:
        # The V2 Ray executor is the one that can overlap scheduling with the GPU step; asking
        # explicitly makes vLLM fail loudly rather than fall back if something forbids it.
        kwargs["async_scheduling"] = True
    if role != "server":
        assert spec.disaggregation is not None
        kwargs["kv_transfer_config"] = {
            "kv_connector": spec.disaggregation.kv_connector,
            "kv_role": "kv_both",
        }
    return kwargs | spec.engine_args


def deployment_config(
    spec: ModelSpec, model_plan: Plan, role: Role, *, graceful_shutdown_s: int | None = None
) -> dict[str, Any]:
    """Serve's options for one deployment. `graceful_shutdown_s` is how long a stopping replica
    may finish its requests: the platform knows it (the notice its nodes give); unset, Ray's
    default (20 s)."""
    bounds = model_plan.group(role).placement
    knobs = autoscaling(spec, model_plan, role)
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
        if spec.router.affinity_kwargs():
            config["request_router_config"]["request_router_kwargs"] = spec.router.affinity_kwargs()
        period = ROUTERS[spec.router.kind].stats_period_s
        if period is not None:
            config["request_router_config"]["request_routing_stats_period_s"] = period
    return config


def llm_config(
    spec: ModelSpec, model_plan: Plan, role: Role, *, graceful_shutdown_s: int | None = None
) -> dict[str, Any]:
    """One LLMConfig, as the keyword arguments of Ray's `LLMConfig` model."""
    group = model_plan.group(role)
    shutdown = graceful_shutdown_s
    config: dict[str, Any] = {
        "model_loading_config": {"model_id": spec.name, "model_source": model_source(spec)},
        "accelerator_type": spec.gpu.ray_accelerator_type,
        "engine_kwargs": engine_kwargs(spec, group.parallelism, role),
        "placement_group_config": {
            "bundle_per_worker": {"CPU": CPUS_PER_GPU_WORKER, "GPU": 1},
            "strategy": placement_strategy(spec, group),
        },
        "deployment_config": deployment_config(
            spec, model_plan, role, graceful_shutdown_s=shutdown
        ),
        # vLLM's own metrics (TTFT, inter-token latency, queue, KV cache, prefix-cache hits)
        # through Ray's metrics export, which the cluster scrapes. On by default in Ray 2.56.1;
        # said here so that a Ray whose default changes cannot silently blind the dashboard.
        "log_engine_metrics": True,
    }
    server_class = ROUTERS[spec.router.kind].server_class
    if server_class is not None:
        config["server_cls"] = server_class
    if spec.env:
        config["runtime_env"] = {"env_vars": dict(spec.env)}
    return config


def application(
    spec: ModelSpec, model_plan: Plan, *, graceful_shutdown_s: int | None = None
) -> dict[str, Any]:
    """One Serve application: direct streaming serves exactly one model per application."""
    import_path = builder(spec)
    shutdown = graceful_shutdown_s
    configs = {
        group.role: llm_config(spec, model_plan, group.role, graceful_shutdown_s=shutdown)
        for group in model_plan.groups
    }
    args: dict[str, Any]
    if import_path == BUILD_PD_OPENAI_APP:
        args = {"prefill_config": configs["prefill"], "decode_config": configs["decode"]}
    elif import_path == BUILD_DP_OPENAI_APP:
        args = {"llm_config": configs["server"]}
    else:
        args = {"llm_configs": [configs["server"]]}
    return {"name": spec.name, "route_prefix": "/", "import_path": import_path, "args": args}


def llm_configs_of(args: Mapping[str, Any]) -> list[tuple[Role, dict[str, Any]]]:
    """(role, LLMConfig) for each LLMConfig in an application's builder args, as `application`
    lays them out for each builder; the dicts are the args' own."""
    found: list[tuple[Role, dict[str, Any]]] = [
        ("server", config) for config in args.get("llm_configs") or []
    ]
    if "llm_config" in args:
        found.append(("server", args["llm_config"]))
    roles: tuple[Role, ...] = ("prefill", "decode")
    found += [(role, args[f"{role}_config"]) for role in roles if f"{role}_config" in args]
    return found


def serve_config(
    spec: ModelSpec, model_plan: Plan, *, graceful_shutdown_s: int | None = None
) -> dict[str, Any]:
    """The RayService's `serveConfigV2`: one model, one application (ray.serve.schema's
    ServeDeploySchema)."""
    return {
        "applications": [application(spec, model_plan, graceful_shutdown_s=graceful_shutdown_s)]
    }


# --- the worker pods ------------------------------------------------------------------------


class WorkerShape(Frozen):
    """One group of identical GPU worker pods. A pod takes a whole node: one Ray node per GKE
    node, so a STRICT_PACK group that fits a node fits a pod."""

    name: str = Field(description="Worker group name, e.g. 'gpu-a3-highgpu-8g'.")
    roles: list[Role] = Field(description="The replica groups (server, prefill, decode) it hosts.")
    machine_type: str
    gke_accelerator: str = Field(description="Value of the cloud.google.com/gke-accelerator label.")
    gpus: int = Field(description="nvidia.com/gpu per pod: all of the node's GPUs.")
    cpus: float = Field(description="CPU request and limit per pod.")
    memory_bytes: int = Field(description="Memory request and limit per pod.")
    shared_memory_bytes: int = Field(description="Size of the memory-backed /dev/shm volume.")
    object_store_bytes: int = Field(description="Ray object store, inside /dev/shm.")
    ray_resources: dict[str, float] = Field(
        description="Custom Ray resources the node advertises, e.g. accelerator_type:A100-80G."
    )
    local_ssd_bytes: int = Field(description="Node-local SSD for caches (0 when none).")
    nodes_per_replica: int = Field(description="Nodes one model replica spans (max of its roles).")
    min_replicas: int = Field(description="Pods at the models' minimum replicas.")
    max_replicas: int = Field(description="Pods at the models' maximum replicas.")


def allocatable(machine: catalog.MachineType) -> tuple[float, int]:
    """(CPUs, memory bytes) a worker pod takes on a node of this type: the catalog's pod
    capacity, rounded down to a tenth of a core and a whole GiB."""
    capacity = catalog.pod_capacity(machine.name)
    return math.floor(capacity.cpus * 10) / 10, capacity.memory_bytes // GIB * GIB


def worker_shapes(spec: ModelSpec, model_plan: Plan) -> list[WorkerShape]:
    """The worker groups a model needs: one per machine type its replica groups run on, sized
    from the plan (pods = nodes, since a pod takes its node)."""
    by_machine: dict[str, list[GroupPlan]] = {}
    for group in model_plan.groups:
        by_machine.setdefault(group.placement.machine_type, []).append(group)
    shapes = []
    for machine_name, groups in by_machine.items():
        machine = catalog.MACHINE_TYPES[machine_name]
        cpus, memory_bytes = allocatable(machine)
        object_store = max(
            2 * GIB, min(OBJECT_STORE_MAX_BYTES, int(memory_bytes * OBJECT_STORE_FRACTION))
        )
        object_store = object_store // GIB * GIB
        shapes.append(
            WorkerShape(
                name=f"gpu-{machine_name}",
                roles=[g.role for g in groups],
                machine_type=machine_name,
                gke_accelerator=machine.gke_accelerator,
                gpus=machine.gpus_per_node,
                cpus=cpus,
                memory_bytes=memory_bytes,
                shared_memory_bytes=object_store + SHM_PER_GPU_BYTES * machine.gpus_per_node,
                object_store_bytes=object_store,
                ray_resources={f"accelerator_type:{spec.gpu.ray_accelerator_type}": 1.0},
                local_ssd_bytes=machine.local_ssd_bytes,
                nodes_per_replica=max(g.placement.nodes_per_replica for g in groups),
                min_replicas=nodes_for([g.placement for g in groups], "min"),
                max_replicas=nodes_for([g.placement for g in groups], "max"),
            )
        )
    return shapes


# --- the compiled model ---------------------------------------------------------------------


class CompiledModel(Frozen):
    """What one planned spec compiles to: the stage every later one (manifests, render, the
    Pulumi components, the local data plane) reads instead of planning or compiling again."""

    spec: ModelSpec
    plan: Plan
    serve_config: dict[str, Any] = Field(description="The RayService's serveConfigV2.")
    cluster_env: dict[str, str] = Field(description="Environment of the head and every worker.")
    worker_shapes: list[WorkerShape]

    @property
    def application(self) -> dict[str, Any]:
        """The one Serve application of `serve_config`."""
        app: dict[str, Any] = self.serve_config["applications"][0]
        return app

    def llm_config(self, role: Role = "server") -> dict[str, Any]:
        """The LLMConfig of one replica group."""
        configs = llm_configs_of(self.application["args"])
        return next(config for found, config in configs if found == role)

    @property
    def machine_types(self) -> list[str]:
        """The machine types the worker pods run on."""
        return [shape.machine_type for shape in self.worker_shapes]


def compile(
    spec: ModelSpec, model_plan: Plan, *, graceful_shutdown_s: int | None = None
) -> CompiledModel:
    """Compile a spec with its plan. `graceful_shutdown_s`: see `deployment_config`."""
    return CompiledModel(
        spec=spec,
        plan=model_plan,
        serve_config=serve_config(spec, model_plan, graceful_shutdown_s=graceful_shutdown_s),
        cluster_env=cluster_env(spec),
        worker_shapes=worker_shapes(spec, model_plan),
    )
