"""Serving: the Ray 2.56 fast paths are really on, and the prefix-affinity router really sees
prompts. Each of these fails silently in a running cluster, so it is caught here."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from packaging.version import InvalidVersion, Version
from pulumi_policy import Severity

from policies.common import ADVISORY, resource_policy
from policies.views import (
    RayServiceView,
    UnreadableError,
    deployments_of,
    planner_verdicts,
    rayservice,
)
from serving.catalog import FP8_ACCELERATORS
from serving.catalog.fast_paths import (
    DIRECT_STREAMING_VARIABLE,
    FAST_PATH_VARIABLES,
    FORWARD_BODY_VARIABLE,
)
from serving.catalog.ray_release import (
    DEFAULT_RAY_IMAGE,
    RAY_FLOOR,
    RAY_FLOOR_REASON,
    image_ray_version,
)
from serving.compile.routers import BODY_AWARE_ROUTERS, ROUTER_CLASSES

BODY_AWARE_CLASSES = {ROUTER_CLASSES[kind] for kind in BODY_AWARE_ROUTERS}


def _pods(view: RayServiceView) -> dict[str, dict[str, str | None]]:
    pods = {"head": view.head_env()}
    pods.update({f"worker group {g.name}": g.env for g in view.worker_groups})
    return pods


def _body_aware(view: RayServiceView) -> bool:
    return any(d.router_class in BODY_AWARE_CLASSES for d in view.deployments)


def _image_floor(
    resource_type: str, name: str, props: Mapping[str, Any], config: Mapping[str, Any]
) -> Iterator[str]:
    view = rayservice(resource_type, name, props)
    if (
        view is None
        or not _body_aware(view)
        or view.head_env().get(DIRECT_STREAMING_VARIABLE) != "1"
    ):
        return
    try:
        floor = Version(str(config.get("min_version", RAY_FLOOR)))
    except InvalidVersion as error:
        raise UnreadableError(name, "min_version", f"is not a version: {error}") from error
    image = view.image()
    if image is None:
        raise UnreadableError(name, "the head container's image")
    found = image_ray_version(image)
    if found is None or found < floor:
        yield (
            f"{view.name}: image {image} runs direct streaming with a prefix-affinity router "
            f"below Ray {floor}; {RAY_FLOOR_REASON}"
        )


def _fast_paths(
    resource_type: str, name: str, props: Mapping[str, Any], config: Mapping[str, Any]
) -> Iterator[str]:
    view = rayservice(resource_type, name, props)
    if view is None:
        return
    required = list(config.get("variables", FAST_PATH_VARIABLES))
    pods = _pods(view)
    for variable in required:
        values = {pod: env.get(variable) for pod, env in pods.items()}
        missing = sorted(pod for pod, value in values.items() if value is None)
        if missing:
            yield f"{view.name}: {variable} is not set on the {', '.join(missing)}"
        elif len(set(values.values())) > 1:
            yield f"{view.name}: {variable} differs between pods: {values}"


def _forward_body(
    resource_type: str, name: str, props: Mapping[str, Any], config: Mapping[str, Any]
) -> Iterator[str]:
    view = rayservice(resource_type, name, props)
    if (
        view is None
        or not _body_aware(view)
        or view.head_env().get(DIRECT_STREAMING_VARIABLE) != "1"
    ):
        return
    lacking = sorted(
        pod for pod, env in _pods(view).items() if env.get(FORWARD_BODY_VARIABLE) != "1"
    )
    if lacking:
        yield (
            f"{view.name}: a prompt-reading router behind direct streaming, but "
            f"{FORWARD_BODY_VARIABLE} is not 1 on the {', '.join(lacking)}: HAProxy never shows "
            "it the prompt, and it "
            "falls back to load balancing"
        )


def _prefix_caching(
    resource_type: str, name: str, props: Mapping[str, Any], config: Mapping[str, Any]
) -> Iterator[str]:
    for view, deployment in deployments_of(resource_type, name, props):
        if deployment.router_class in BODY_AWARE_CLASSES and not deployment.engine.get(
            "enable_prefix_caching", True
        ):
            yield (
                f"{view.name} ({deployment.role}): requests are routed to the replica caching "
                "their prefix, but enable_prefix_caching is false: there is no cache to hit"
            )


def _fp8_compute(
    resource_type: str, name: str, props: Mapping[str, Any], config: Mapping[str, Any]
) -> Iterator[str]:
    for view, deployment in deployments_of(resource_type, name, props):
        yield from planner_verdicts(view, deployment, "fp8-weight-only")


SERVING_POLICIES = [
    resource_policy(
        "serving-rayservice-image-floor",
        f"Direct streaming with a prefix-affinity router runs Ray {RAY_FLOOR} or newer.",
        f"Set servestack:ray_image to {DEFAULT_RAY_IMAGE} or newer.",
        _image_floor,
        severity=Severity.CRITICAL,
        config={
            "min_version": {
                "type": "string",
                "default": str(RAY_FLOOR),
                "description": "Lowest Ray version allowed with direct streaming and the router.",
            }
        },
    ),
    resource_policy(
        "serving-rayservice-fast-paths",
        "The Ray 2.56 fast-path variables are set, alike, on the head and every worker.",
        "Render the RayService with servestack (cluster_env goes on every container); switch a "
        "fast path off in the profile's fast_paths, never on one pod.",
        _fast_paths,
        config={
            "variables": {
                "type": "array",
                "items": {"type": "string"},
                "default": list(FAST_PATH_VARIABLES),
                "description": "Variables every Ray container must carry.",
            }
        },
    ),
    resource_policy(
        "serving-rayservice-forward-body",
        "A prompt-reading router under direct streaming has HAProxy forward the request body.",
        f"Set {FORWARD_BODY_VARIABLE}=1 on the head and every worker "
        "(servestack's cluster_env does).",
        _forward_body,
    ),
    resource_policy(
        "serving-rayservice-prefix-caching",
        "The prefix-affinity router is used only with vLLM's prefix caching on.",
        "Set prefix_caching: true in the profile, or use router: power_of_two.",
        _prefix_caching,
    ),
    resource_policy(
        "serving-rayservice-fp8-compute",
        "FP8 is asked only of GPUs with FP8 tensor cores; elsewhere it runs weight-only.",
        f"Serve FP8 on {' or '.join(FP8_ACCELERATORS)}, or accept W8A16 for its memory saving.",
        _fp8_compute,
        enforcement=ADVISORY,
        severity=Severity.LOW,
    ),
]
