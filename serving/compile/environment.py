"""The environment of the Ray head and every worker container: Ray 2.56's fast paths, each
switched by its profile field, and body forwarding for a prompt-reading router.

Every name is the one `serving.catalog.environment` spells (the fast-path table in
`serving.catalog.fast_paths` pairs each with its profile field); this module only decides the
values."""

from __future__ import annotations

from serving.catalog.environment import (
    RAY_SERVE_INGRESS_REQUEST_ROUTER_FORWARD_BODY,
    RAY_SERVE_INGRESS_REQUEST_ROUTER_METRICS_ENABLED,
)
from serving.catalog.fast_paths import FAST_PATHS
from serving.compile.routers import BODY_AWARE_ROUTERS
from serving.spec.profile import ModelSpec


def _flag(on: bool) -> str:
    return "1" if on else "0"


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
        env[RAY_SERVE_INGRESS_REQUEST_ROUTER_FORWARD_BODY] = "1"
        # A body over HAProxy's buffer reaches the router cut short, and the router places the
        # request without its prompt. Ray counts those only when asked (one log line a request
        # to Serve's HAProxy actor): the routing alerts read the count.
        env[RAY_SERVE_INGRESS_REQUEST_ROUTER_METRICS_ENABLED] = "1"
    return env
