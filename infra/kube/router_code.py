"""servestack's own request router on the cluster: the stock Ray image holds no code of ours, so
a model that routes with servestack's router ships the router's modules as source in a ConfigMap,
mounted on the head and every worker and put on the Python path."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from infra.kube.namespaces import SERVING_NAMESPACE
from serving.compile.routers import SERVESTACK_ROUTERS
from serving.spec import names
from serving.spec.profile import ModelSpec

# servestack's own request router reaches the stock Ray image as source: a ConfigMap holding the
# whole `serving.router` package, mounted on the head and every worker under a root on the path
# (`serving` there is a namespace package: the rest of servestack never reaches a pod).
ROUTER_PACKAGE_ROOT = "/opt/servestack"
ROUTER_PACKAGE = "serving.router"


def ships_router(spec: ModelSpec) -> bool:
    """Whether the model routes with servestack's own router, whose code the pods need."""
    return spec.router.kind in SERVESTACK_ROUTERS


def router_configmap_name(spec: ModelSpec) -> str:
    return names.router_configmap_name(spec.name)


def router_configmap(spec: ModelSpec) -> dict[str, Any]:
    """The router package as `serving.router` holds it, every module of it: imported by Ray
    Serve in every process that routes (the ingress request router on workers, proxies on every
    node). It imports only Ray and the standard library (import-linter holds it to that), which
    the stock image has (the precise router's server class also vLLM's event types, pyzmq and
    msgspec, which the image's vLLM brings)."""
    package = importlib.util.find_spec(ROUTER_PACKAGE)
    assert package is not None and package.submodule_search_locations is not None
    (folder,) = package.submodule_search_locations
    data = {path.name: path.read_text() for path in sorted(Path(folder).glob("*.py"))}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": router_configmap_name(spec), "namespace": SERVING_NAMESPACE},
        "data": data,
    }


def router_volume(spec: ModelSpec) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(volumes, mounts) that put servestack's router on the pod's Python path."""
    if not ships_router(spec):
        return [], []
    package = ROUTER_PACKAGE.replace(".", "/")
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
