"""Ray 2.56's fast paths as one table: the profile field that switches each one, the
environment variable Ray reads for it, and the variable a body-aware router adds behind direct
streaming. The spec, the compiler, the policy pack and the docs all read this table."""

from __future__ import annotations

from dataclasses import dataclass

from serving.catalog.environment import (
    RAY_SERVE_ENABLE_HA_PROXY,
    RAY_SERVE_INGRESS_REQUEST_ROUTER_FORWARD_BODY,
    RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING,
    RAY_SERVE_THROUGHPUT_OPTIMIZED,
    VLLM_USE_RAY_V2_EXECUTOR_BACKEND,
)


@dataclass(frozen=True)
class FastPath:
    field: str
    """The `fast_paths` field of a profile that switches it."""
    variable: str
    """The environment variable Ray (or vLLM) reads on the head and every worker."""
    description: str


FAST_PATHS: tuple[FastPath, ...] = (
    FastPath("haproxy", RAY_SERVE_ENABLE_HA_PROXY, "Ray Serve's HAProxy ingress."),
    FastPath(
        "direct_streaming",
        RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING,
        "Stream tokens from the replica to HAProxy, past Serve's router and proxy.",
    ),
    FastPath(
        "throughput_optimized",
        RAY_SERVE_THROUGHPUT_OPTIMIZED,
        "Serve's throughput-optimised settings (fewer hops and event-loop handoffs).",
    ),
    FastPath(
        "ray_v2_executor",
        VLLM_USE_RAY_V2_EXECUTOR_BACKEND,
        "vLLM's Ray V2 executor backend, with async scheduling.",
    ),
)
FAST_PATH_VARIABLES: tuple[str, ...] = tuple(path.variable for path in FAST_PATHS)
# Under direct streaming HAProxy asks the router for a replica; without this it sends the router
# no body, and a prompt-reading router silently falls back to load balancing.
FORWARD_BODY_VARIABLE = RAY_SERVE_INGRESS_REQUEST_ROUTER_FORWARD_BODY

# Every variable servestack sets cluster-wide, with where a profile switches it instead.
CLUSTER_ENV_NAMES: dict[str, str] = {
    **{path.variable: f"fast_paths.{path.field}" for path in FAST_PATHS},
    FORWARD_BODY_VARIABLE: "router (set with a body-aware router)",
}


def fast_path(field: str) -> FastPath:
    (found,) = [path for path in FAST_PATHS if path.field == field]
    return found


DIRECT_STREAMING_VARIABLE = fast_path("direct_streaming").variable
