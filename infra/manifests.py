"""The Kubernetes objects one model needs, as plain manifests: its RayService (its route at the
edge is `infra/edge.py`'s). Built only from serving's compiled outputs (serveConfigV2, cluster
environment, worker shapes) and the platform's scheduling contract; the Pulumi components
register them and `servestack render` writes them for review, so what is reviewed is what is
deployed.

No secret value ever enters a manifest: the Hugging Face token is a `secretKeyRef` to a Secret
the LlmService component makes from a Pulumi secret.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import yaml

from infra.edge import model_ingress
from infra.namespaces import SERVING_NAMESPACE
from infra.ray_security import harden
from serving import names
from serving.catalog import GIB
from serving.compiler import (
    MODEL_MOUNT_ROOT,
    PROFILE_ANNOTATION,
    SERVE_PORT,
    WorkerShape,
    cluster_env,
    gcs_weights,
    serve_config,
    worker_shapes,
)
from serving.errors import ServestackError
from serving.limits import size_problems
from serving.ray_release import RAY_FLOOR, image_ray_version
from serving.routers import SERVESTACK_ROUTERS
from serving.scheduling import GPU_TAINT_KEY, POOL_LABEL, SYSTEM_POOL, gpu_node_selector
from serving.spec import ModelSpec

RAY_API_VERSION = "ray.io/v1"
HF_TOKEN_KEY = "token"

# Hugging Face downloads land on the node's local SSD (GKE puts emptyDir there when the pool
# uses local SSD for ephemeral storage), so a restarted pod on the same node starts warm.
HF_CACHE_PATH = "/mnt/hf-cache"
HEAD_CPUS = 4
HEAD_MEMORY_BYTES = 16 * GIB
# Model weights take minutes to download and load; Serve reports unhealthy meanwhile. Past these
# bounds KubeRay replaces the cluster, so they are sized for a 700 GB checkpoint, not a test.
SERVICE_UNHEALTHY_SECONDS = 3600
DEPLOYMENT_UNHEALTHY_SECONDS = 3600
AUTOSCALER_IDLE_TIMEOUT_SECONDS = 600
TERMINATION_GRACE_SECONDS = 120
GCSFUSE_DRIVER = "gcsfuse.csi.storage.gke.io"
# servestack's own request router reaches the stock Ray image as source: a ConfigMap holding the
# `serving` package's router module, mounted on the head and every worker and put on the path.
ROUTER_PACKAGE_ROOT = "/opt/servestack"
ROUTER_MODULE = "serving.routing"


def resource_name(spec: ModelSpec) -> str:
    """The model's name in Kubernetes (`serving.names` derives every name a model takes)."""
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


def ships_router(spec: ModelSpec) -> bool:
    """Whether the model routes with servestack's own router, whose code the pods need."""
    return spec.router.kind in SERVESTACK_ROUTERS


def router_configmap_name(spec: ModelSpec) -> str:
    return names.router_configmap_name(spec.name)


def router_configmap(spec: ModelSpec) -> dict[str, Any]:
    """The router's module as the package `serving` holds it: imported by Ray Serve in every
    process that routes (the ingress request router on workers, proxies on every node). It
    needs only Ray and the standard library, which the stock image has."""
    module = importlib.util.find_spec(ROUTER_MODULE)
    assert module is not None and module.origin is not None
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": router_configmap_name(spec), "namespace": SERVING_NAMESPACE},
        "data": {"__init__.py": "", "routing.py": Path(module.origin).read_text()},
    }


def _router_volume(spec: ModelSpec) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(volumes, mounts) that put servestack's router on the pod's Python path."""
    if not ships_router(spec):
        return [], []
    package = ROUTER_MODULE.partition(".")[0]
    return (
        [{"name": "servestack-router", "configMap": {"name": router_configmap_name(spec)}}],
        [
            {
                "name": "servestack-router",
                "mountPath": f"{ROUTER_PACKAGE_ROOT}/{package}",
                "readOnly": True,
            }
        ],
    )


def _env(spec: ModelSpec, with_token: bool) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {"name": name, "value": value} for name, value in cluster_env(spec).items()
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


def _head(spec: ModelSpec, image: str, with_token: bool) -> dict[str, Any]:
    resources = {"cpu": str(HEAD_CPUS), "memory": _quantity(HEAD_MEMORY_BYTES)}
    volumes, mounts = _router_volume(spec)
    head: dict[str, Any] = {
        # The head schedules and routes; it runs no replica (num-cpus 0) and needs no GPU.
        "rayStartParams": {"num-cpus": "0", "dashboard-host": "0.0.0.0"},
        "template": {
            "spec": {
                "serviceAccountName": service_account_name(spec),
                "nodeSelector": {POOL_LABEL: SYSTEM_POOL},
                "containers": [
                    {
                        "name": "ray-head",
                        "image": image,
                        "env": _env(spec, with_token),
                        "resources": {"requests": resources, "limits": dict(resources)},
                        "ports": [
                            {"name": "gcs-server", "containerPort": 6379},
                            {"name": "dashboard", "containerPort": 8265},
                            {"name": "client", "containerPort": 10001},
                            {"name": "serve", "containerPort": SERVE_PORT},
                        ],
                    }
                ],
            }
        },
    }
    if volumes:
        head["template"]["spec"]["volumes"] = volumes
        head["template"]["spec"]["containers"][0]["volumeMounts"] = mounts
    return head


def _worker_group(
    spec: ModelSpec, shape: WorkerShape, image: str, with_token: bool
) -> dict[str, Any]:
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
        {"name": "hf-cache", "emptyDir": {}},
    ]
    mounts: list[dict[str, Any]] = [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "hf-cache", "mountPath": HF_CACHE_PATH},
    ]
    router_volumes, router_mounts = _router_volume(spec)
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
            "nodeSelector": gpu_node_selector(shape.machine_type),
            "tolerations": [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
            "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
            "containers": [
                {
                    "name": "ray-worker",
                    "image": image,
                    "env": _env(spec, with_token),
                    "resources": {"requests": resources, "limits": dict(resources)},
                    "volumeMounts": mounts,
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


def rayservice(
    spec: ModelSpec, image: str, *, with_hf_token: bool = True, token_generation: int = 0
) -> dict[str, Any]:
    """The model's RayService: its compiled Serve application on its own Ray cluster, locked
    down by `harden` (token auth, securityContexts, the workers' own identity)."""
    name = resource_name(spec)
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
            "serveConfigV2": yaml.safe_dump(serve_config(spec), sort_keys=False),
            # A new cluster takes over before the old one goes: no serving gap on upgrade.
            "upgradeStrategy": {"type": "NewCluster"},
            "serviceUnhealthySecondThreshold": SERVICE_UNHEALTHY_SECONDS,
            "deploymentUnhealthySecondThreshold": DEPLOYMENT_UNHEALTHY_SECONDS,
            "rayClusterConfig": {
                "rayVersion": ray_version(image),
                "enableInTreeAutoscaling": True,
                "autoscalerOptions": {
                    "version": "v2",
                    "upscalingMode": "Default",
                    "idleTimeoutSeconds": AUTOSCALER_IDLE_TIMEOUT_SECONDS,
                },
                "headGroupSpec": _head(spec, image, with_hf_token),
                "workerGroupSpecs": [
                    _worker_group(spec, shape, image, with_hf_token)
                    for shape in worker_shapes(spec)
                ],
            },
        },
    }
    return harden(
        manifest,
        model=name,
        worker_account=worker_service_account_name(spec),
        token_generation=token_generation,
    )


def model_objects(
    spec: ModelSpec,
    *,
    image: str,
    host: str | None,
    requests_per_second: int,
    stream_timeout_s: int,
    with_hf_token: bool,
    token_generation: int = 0,
) -> list[dict[str, Any]]:
    """Every Kubernetes object of one model that carries what its profile says."""
    objects = [
        rayservice(spec, image, with_hf_token=with_hf_token, token_generation=token_generation),
        model_ingress(
            spec,
            host=host,
            requests_per_second=requests_per_second,
            stream_timeout_s=stream_timeout_s,
        ),
    ]
    if ships_router(spec):
        objects.append(router_configmap(spec))
    return objects


def check_sizes(objects: list[dict[str, Any]], source: str) -> None:
    """Refuse, naming the profile, any object the Kubernetes API would not store: nothing of a
    model is registered or rendered when one of its objects is too large."""
    for manifest in objects:
        problems = size_problems(manifest)
        if problems:
            raise ServestackError(
                source, f"{manifest['kind']} {manifest['metadata']['name']}",
                "; ".join(problems),
                "the profile's env, engine_args or inline architecture are far too large: "
                "shorten them (the RayService carries the whole profile)",
            )  # fmt: skip


def kuberay_values() -> dict[str, Any]:
    """Values for the `kuberay-operator` chart: the operator on the system pool."""
    resources = {"cpu": "500m", "memory": "512Mi"}
    return {
        "nodeSelector": {POOL_LABEL: SYSTEM_POOL},
        "resources": {"requests": resources, "limits": {"cpu": "1", "memory": "1Gi"}},
    }
