"""lora-routing: LoRA adapters behind direct streaming need a router that sees the adapter.

Ray 2.56.1's direct-streaming path (HAProxy asks the `LLMRouter` deployment for a replica,
`ray/llm/_internal/serve/core/ingress/router.py:105-180`) hands the deployment's request router
the parsed request body and nothing else: no multiplexed model id, so Ray's multiplex-aware
choice (which the ingress path gets from `handle.options(multiplexed_model_id=...)`,
`ingress.py:285-325`) never happens there. A request for an adapter then lands on any replica.
Only a router that reads the model id from the body can route it, and only when HAProxy forwards
the body (`RAY_SERVE_INGRESS_REQUEST_ROUTER_FORWARD_BODY`). LoRA-aware direct streaming arrived
upstream in Ray 2.60, with the body forwarded; on 2.56.1 servestack refuses rather than
degrade silently.

`lora_routing_problem` is the one judgement: the planner asks it of a profile (this rule), the
policy pack of a rendered RayService (`policies/lora.py`).
"""

from __future__ import annotations

from serving.catalog.fast_paths import FORWARD_BODY_VARIABLE
from serving.plan.rules.verdict import Case, Finding, Rule
from serving.spec.parts import ADAPTER_AWARE_ROUTERS

ADAPTER_AWARE_KINDS = ", ".join(sorted(ADAPTER_AWARE_ROUTERS))


def lora_routing_problem(
    *, direct_streaming: bool, router: str, adapter_aware: bool, forwards_body: bool
) -> str | None:
    """Why requests for adapters would be routed blind, or None where they are not.

    `router` names the router for the message; `adapter_aware`: it reads the adapter from the
    request body; `forwards_body`: HAProxy hands the router the body."""
    if not direct_streaming:
        return None  # Serve's ingress names the adapter to every router (multiplexed model id)
    if not adapter_aware:
        return (
            f"LoRA adapters behind direct streaming with the {router} router: Ray 2.56.1 hands "
            "a router only the request body there, and this one does not read the adapter from "
            "it, so a request for an adapter lands on any replica and waits for it to load"
        )
    if not forwards_body:
        return (
            f"LoRA adapters behind direct streaming, but {FORWARD_BODY_VARIABLE} is not 1: "
            f"HAProxy never shows the {router} router the request, so it cannot see the adapter"
        )
    return None


def lora_routing(case: Case) -> Finding | None:
    spec = case.spec
    if spec.lora is None:
        return None
    adapter_aware = spec.router.kind in ADAPTER_AWARE_ROUTERS
    problem = lora_routing_problem(
        direct_streaming=spec.fast_paths.direct_streaming,
        router=spec.router.kind,
        adapter_aware=adapter_aware,
        # The compiler forwards the body to every body-reading router, and every adapter-aware
        # one reads the body (serving.compile.environment.forwards_body).
        forwards_body=adapter_aware,
    )
    if problem is None:
        return None
    return Finding(
        f"{problem} — use router: {ADAPTER_AWARE_KINDS}, or fast_paths.direct_streaming: false"
    )


RULE = Rule(
    code="lora-routing",
    severity="error",
    field="router",
    meaning="LoRA adapters behind direct streaming without a router that reads the adapter from "
    "the forwarded request body (Ray 2.56.1 routes them blind)",
    judge=lora_routing,
)
