"""The Kubernetes objects one model needs, as plain manifests: its RayService (its route at the
edge is `infra/kube/edge.py`'s). Built only from serving's compiled outputs (serveConfigV2, cluster
environment, worker shapes) and the platform's scheduling contract. `infra/kube/model_objects.py`
builds each model's objects once from here, for the Pulumi components to register and
`servestack render` to write for review, so what is reviewed is what is deployed.

No secret value ever enters a manifest: the Hugging Face token is a `secretKeyRef` to a Secret
the LlmService component makes from a Pulumi secret.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import yaml

from infra.kube.disruption import (
    Resilience,
    drain_command,
    gcs_fault_tolerance,
    gcs_tls_pieces,
    haproxy_env,
    head_annotations,
)
from infra.kube.namespaces import SERVING_NAMESPACE
from infra.kube.ray_security import harden
from infra.kube.router_code import (
    ROUTER_PACKAGE_ROOT,
    router_volume,
    ships_router,
)
from serving.catalog import GIB
from serving.catalog.ray_ports import HEAD_PORTS
from serving.catalog.ray_release import RAY_FLOOR, image_ray_version
from serving.compile.compiler import PROFILE_ANNOTATION, CompiledModel, compile
from serving.compile.scheduling import (
    COMPUTE_CLASS_LABEL,
    GPU_TAINT_KEY,
    POOL_LABEL,
    SYSTEM_POOL,
    gpu_node_selector,
)
from serving.compile.weights import MODEL_MOUNT_ROOT, gcs_weights
from serving.compile.workers import WorkerShape
from serving.plan.planner import Plan
from serving.spec import names
from serving.spec.profile import ModelSpec

RAY_API_VERSION = "ray.io/v1"
HF_TOKEN_KEY = "token"

# Hugging Face downloads land on the node's local SSD (GKE puts emptyDir there when the pool
# uses local SSD for ephemeral storage).
HF_CACHE_PATH = "/mnt/hf-cache"
# Where a stack that asks for a node-wide weights cache keeps it: a directory on the node's
# local SSD (GKE mounts the ephemeral local SSDs there), which outlives the pod but not the node.
NODE_WEIGHTS_CACHE_DIR = "/mnt/stateful_partition/kube-ephemeral-ssd/servestack-hf-cache"
# The head runs no replica (num-cpus 0): the GCS, the dashboard, the Serve controller and the
# head's proxy. Two cores and 8 GiB hold them for a cluster of a few GPU nodes, and leave room
# on a 4-vCPU system node (3.92 allocatable CPUs, ~13.3 GiB) for the edge and the operator.
HEAD_CPUS = 2
HEAD_MEMORY_BYTES = 8 * GIB
# KubeRay's own default for its autoscaler sidecar, written out so the head pod's size, which
# includes it, is what the fit checks see.
AUTOSCALER_RESOURCES = {"cpu": "500m", "memory": "512Mi"}
AUTOSCALER_IDLE_TIMEOUT_SECONDS = 600
GCSFUSE_DRIVER = "gcsfuse.csi.storage.gke.io"


def resource_name(spec: ModelSpec) -> str:
    """The model's name in Kubernetes (`serving.spec.names` derives every name a model takes)."""
    return names.kubernetes_name(spec.name)


def serve_service_name(spec: ModelSpec) -> str:
    return names.serve_service_name(spec.name)


def hf_secret_name(spec: ModelSpec) -> str:
    return names.hf_secret_name(spec.name)


def service_account_name(spec: ModelSpec) -> str:
    """The Kubernetes service account the model's Ray head runs as: KubeRay binds its
    autoscaler's Role (patch pods and RayClusters) to it."""
    return names.service_account_name(spec.name)


def worker_service_account_name(spec: ModelSpec) -> str:
    """The account the model's workers run as: no Kubernetes API token, no autoscaler Role;
    Workload Identity lets it read the weights bucket."""
    return names.worker_service_account_name(spec.name)


def ray_version(image: str) -> str:
    """The Ray version a `rayproject/ray-llm:<version>-...` image carries (KubeRay gates
    features on it), the floor where the tag names none."""
    return str(image_ray_version(image) or RAY_FLOOR)


def _env(model: CompiledModel, with_token: bool) -> list[dict[str, Any]]:
    spec = model.spec
    env: list[dict[str, Any]] = [
        {"name": name, "value": value} for name, value in model.cluster_env.items()
    ]
    env.append({"name": "HF_HOME", "value": HF_CACHE_PATH})
    if ships_router(spec):
        env.append({"name": "PYTHONPATH", "value": ROUTER_PACKAGE_ROOT})
    if with_token:
        env.append(
            {
                "name": "HF_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": hf_secret_name(spec), "key": HF_TOKEN_KEY}},
            }
        )
    return env


def _quantity(size_bytes: int) -> str:
    return f"{size_bytes // GIB}Gi" if size_bytes % GIB == 0 else f"{size_bytes // 2**20}Mi"


def _head(
    model: CompiledModel, image: str, with_token: bool, resilience: Resilience
) -> dict[str, Any]:
    spec = model.spec
    resources = {"cpu": str(HEAD_CPUS), "memory": _quantity(HEAD_MEMORY_BYTES)}
    volumes, mounts = router_volume(spec)
    ca_volumes, ca_mounts, ca_env = gcs_tls_pieces(resilience)
    volumes, mounts = volumes + ca_volumes, mounts + ca_mounts
    head: dict[str, Any] = {
        # The head schedules and routes; it runs no replica (num-cpus 0) and needs no GPU.
        "rayStartParams": {"num-cpus": "0", "dashboard-host": "0.0.0.0"},
        "template": {
            "metadata": {"annotations": head_annotations()},
            "spec": {
                "serviceAccountName": service_account_name(spec),
                "nodeSelector": {POOL_LABEL: SYSTEM_POOL},
                "containers": [
                    {
                        "name": "ray-head",
                        "image": image,
                        "env": _env(model, with_token) + haproxy_env(resilience) + ca_env,
                        "resources": {"requests": resources, "limits": dict(resources)},
                        "ports": [
                            {"name": port.name, "containerPort": port.port} for port in HEAD_PORTS
                        ],
                    }
                ],
            },
        },
    }
    if volumes:
        head["template"]["spec"]["volumes"] = volumes
        head["template"]["spec"]["containers"][0]["volumeMounts"] = mounts
    return head


def _weights_cache_volume(resilience: Resilience) -> dict[str, Any]:
    """The Hugging Face cache: the pod's own (emptyDir, gone with the pod), or a directory on
    the node's local SSD that a restarted pod on the same node finds warm."""
    if resilience.weights_cache == "node":
        return {
            "name": "hf-cache",
            "hostPath": {"path": NODE_WEIGHTS_CACHE_DIR, "type": "DirectoryOrCreate"},
        }
    return {"name": "hf-cache", "emptyDir": {}}


def _node_selector(machine_type: str, compute_class: str | None) -> dict[str, str]:
    """A worker on a capacity chain selects its ComputeClass, whose pools may be of several
    machine types; otherwise its machine type's pool."""
    if compute_class is not None:
        return {COMPUTE_CLASS_LABEL: compute_class}
    return gpu_node_selector(machine_type)


def _tolerations(compute_class: str | None) -> list[dict[str, str]]:
    tolerations = [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]
    if compute_class is not None:
        tolerations.append(
            {
                "key": COMPUTE_CLASS_LABEL,
                "operator": "Equal",
                "value": compute_class,
                "effect": "NoSchedule",
            }
        )
    return tolerations


def _worker_group(
    model: CompiledModel,
    shape: WorkerShape,
    image: str,
    with_token: bool,
    resilience: Resilience,
    compute_class: str | None = None,
) -> dict[str, Any]:
    spec = model.spec
    resources = {
        "cpu": f"{shape.cpus:g}",
        "memory": _quantity(shape.memory_bytes),
        "nvidia.com/gpu": str(shape.gpus),
    }
    volumes: list[dict[str, Any]] = [
        # NCCL, vLLM's message queues and Ray's object store live in /dev/shm; the container
        # runtime's 64 MB default would fail the first tensor-parallel all-reduce.
        {
            "name": "dshm",
            "emptyDir": {"medium": "Memory", "sizeLimit": _quantity(shape.shared_memory_bytes)},
        },
        _weights_cache_volume(resilience),
    ]
    mounts: list[dict[str, Any]] = [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "hf-cache", "mountPath": HF_CACHE_PATH},
    ]
    router_volumes, router_mounts = router_volume(spec)
    volumes += router_volumes
    mounts += router_mounts
    annotations: dict[str, str] = {}
    weights = gcs_weights(spec)
    if weights is not None:
        bucket, _ = weights
        # GCS FUSE through Workload Identity: the sidecar mounts the bucket read-only where the
        # compiler told vLLM to load from.
        annotations["gke-gcsfuse/volumes"] = "true"
        volumes.append(
            {
                "name": "weights",
                "csi": {
                    "driver": GCSFUSE_DRIVER,
                    "readOnly": True,
                    "volumeAttributes": {
                        "bucketName": bucket,
                        "mountOptions": "implicit-dirs,file-cache:enable-parallel-downloads:true",
                    },
                },
            }
        )
        mounts.append(
            {"name": "weights", "mountPath": f"{MODEL_MOUNT_ROOT}/{bucket}", "readOnly": True}
        )
    template: dict[str, Any] = {
        "spec": {
            "serviceAccountName": service_account_name(spec),
            "nodeSelector": _node_selector(shape.machine_type, compute_class),
            "tolerations": _tolerations(compute_class),
            "terminationGracePeriodSeconds": resilience.pod_grace_s(shape.machine_type),
            "containers": [
                {
                    "name": "ray-worker",
                    "image": image,
                    "env": _env(model, with_token) + haproxy_env(resilience),
                    "resources": {"requests": resources, "limits": dict(resources)},
                    "volumeMounts": mounts,
                    "lifecycle": {
                        "preStop": {
                            "exec": {
                                "command": drain_command(resilience.pod_grace_s(shape.machine_type))
                            }
                        }
                    },
                }
            ],
            "volumes": volumes,
        }
    }
    if annotations:
        template["metadata"] = {"annotations": annotations}
    return {
        "groupName": shape.name,
        "replicas": shape.min_replicas,
        "minReplicas": shape.min_replicas,
        "maxReplicas": shape.max_replicas,
        "numOfHosts": 1,
        "rayStartParams": {
            "num-gpus": str(shape.gpus),
            "object-store-memory": str(shape.object_store_bytes),
        },
        # Custom Ray resources (accelerator_type:A100-80G): Ray cannot tell A100s apart itself.
        "resources": {key: f"{value:g}" for key, value in shape.ray_resources.items()},
        "template": template,
    }


def compile_for(spec: ModelSpec, model_plan: Plan, resilience: Resilience) -> CompiledModel:
    """Compile a planned spec for nodes with this resilience: a stopping replica gets the time
    to finish its streams inside the shortest notice its nodes give."""
    machine_types = [group.placement.machine_type for group in model_plan.groups]
    return compile(spec, model_plan, graceful_shutdown_s=resilience.serve_shutdown_s(machine_types))


def rayservice(
    model: CompiledModel,
    image: str,
    *,
    with_hf_token: bool = True,
    token_generation: int = 0,
    resilience: Resilience | None = None,
    compute_classes: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The model's RayService: its compiled Serve application on its own Ray cluster, locked
    down by `harden` (token auth, securityContexts, the workers' own identity), its GCS state
    in the stack's Redis, drains and upgrades fitted to the notice its nodes give (the Serve
    application's own shutdown time was fitted when it was compiled, `compile_for`). A worker
    group whose machine type has a capacity chain selects its ComputeClass (`compute_classes`,
    by machine type)."""
    spec = model.spec
    name = resource_name(spec)
    resilience = resilience or Resilience()
    manifest = {
        "apiVersion": RAY_API_VERSION,
        "kind": "RayService",
        "metadata": {
            "name": name,
            "namespace": SERVING_NAMESPACE,
            "labels": {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "servestack"},
            "annotations": {
                PROFILE_ANNOTATION: json.dumps(spec.model_dump(mode="json"), sort_keys=True)
            },
        },
        "spec": {
            "serveConfigV2": yaml.safe_dump(model.serve_config, sort_keys=False),
            # A new cluster takes over before the old one goes: no serving gap on upgrade. The
            # GPU pools hold room for it (the platform plan adds the largest model's minimum).
            "upgradeStrategy": {"type": "NewCluster"},
            "rayClusterDeletionDelaySeconds": resilience.cluster_deletion_delay_s,
            "rayClusterConfig": {
                "rayVersion": ray_version(image),
                # A new head reads the cluster's state back from Redis; KubeRay then keeps the
                # workers (and the weights they loaded) instead of replacing them all.
                "gcsFaultToleranceOptions": gcs_fault_tolerance(),
                "enableInTreeAutoscaling": True,
                "autoscalerOptions": {
                    "version": "v2",
                    "upscalingMode": "Default",
                    "idleTimeoutSeconds": AUTOSCALER_IDLE_TIMEOUT_SECONDS,
                    "resources": {
                        "requests": dict(AUTOSCALER_RESOURCES),
                        "limits": dict(AUTOSCALER_RESOURCES),
                    },
                },
                "headGroupSpec": _head(model, image, with_hf_token, resilience),
                "workerGroupSpecs": [
                    _worker_group(
                        model,
                        shape,
                        image,
                        with_hf_token,
                        resilience,
                        (compute_classes or {}).get(shape.machine_type),
                    )
                    for shape in model.worker_shapes
                ],
            },
        },
    }
    hardened = harden(
        manifest,
        model=name,
        worker_account=worker_service_account_name(spec),
        token_generation=token_generation,
    )
    # Set after hardening, which copies the manifest: in the program the address is the
    # Memorystore instance's output, which cannot be copied.
    hardened["spec"]["rayClusterConfig"]["gcsFaultToleranceOptions"]["redisAddress"] = (
        resilience.gcs_address
    )
    return hardened


def kuberay_values() -> dict[str, Any]:
    """Values for the `kuberay-operator` chart: the operator on the system pool."""
    resources = {"cpu": "500m", "memory": "512Mi"}
    return {
        "nodeSelector": {POOL_LABEL: SYSTEM_POOL},
        "resources": {"requests": resources, "limits": {"cpu": "1", "memory": "1Gi"}},
    }
