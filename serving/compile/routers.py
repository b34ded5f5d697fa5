"""Ray Serve request routers as one table: for each router kind a profile can name, the class
Ray Serve loads, whether it reads the prompt (so HAProxy must forward the body under direct
streaming), and whether the code is servestack's own (so the pods must be given it).

The compiler, the manifests and the policy pack read this table. Class paths are strings: the
router modules import Ray Serve, which planning and compiling do not need. Which routers read the
LoRA adapter a request names is `serving.spec.parts.ADAPTER_AWARE_ROUTERS`, where the planner's
lora-routing rule can ask it."""

from __future__ import annotations

from dataclasses import dataclass

from serving.spec.parts import RouterKind


@dataclass(frozen=True)
class RouterClass:
    class_path: str | None
    """`module:Class` for Serve's request_router_config; None for Serve's default."""
    reads_body: bool
    """It routes on the prompt: without the request body it degrades to load balancing."""
    ships_code: bool
    """servestack's own code: the stock Ray image lacks it, so the RayService ships it."""
    server_class: str | None = None
    """`module:Class` for LLMConfig.server_cls: the replicas report their engine's cache."""
    stats_period_s: float | None = None
    """How often Serve asks each replica for its routing stats (Ray's default: 10 s)."""


# Ray Serve's default router (ray.serve._private.constants.DEFAULT_REQUEST_ROUTER_PATH).
RAY_DEFAULT_ROUTER_CLASS = "ray.serve._private.request_router:PowerOfTwoChoicesRequestRouter"

ROUTERS: dict[RouterKind, RouterClass] = {
    "prefix_affinity": RouterClass(
        "ray.serve.llm.request_router:PrefixCacheAffinityRouter", reads_body=True, ships_code=False
    ),
    "servestack_prefix_affinity": RouterClass(
        "serving.router.prefix_affinity:PrefixAffinityRouter",
        reads_body=True,
        ships_code=True,
    ),
    "servestack_precise_prefix": RouterClass(
        "serving.router.precise:PrecisePrefixRouter",
        reads_body=True,
        ships_code=True,
        server_class="serving.router.cache_server:CacheReportingServer",
        # A cleared or restarted cache stops drawing its prompts within about this long; each
        # report is one small actor call per replica and one broadcast to the routers.
        stats_period_s=1.0,
    ),
    "round_robin": RouterClass(
        "ray.serve.experimental.round_robin_router:RoundRobinRouter",
        reads_body=False,
        ships_code=False,
    ),
    "power_of_two": RouterClass(None, reads_body=False, ships_code=False),
}

ROUTER_CLASSES: dict[RouterKind, str | None] = {
    kind: router.class_path for kind, router in ROUTERS.items()
}
BODY_AWARE_ROUTERS = frozenset(kind for kind, router in ROUTERS.items() if router.reads_body)
SERVESTACK_ROUTERS = frozenset(kind for kind, router in ROUTERS.items() if router.ships_code)
