"""The PromQL the dashboard and the alert policies are written in: rates and quantiles over one
window, and the label matchers that pick out one model's series in each exporter's metrics."""

from __future__ import annotations

import re

from infra.kube.manifests import serve_service_name
from infra.kube.namespaces import SERVING_NAMESPACE
from serving.plan.planner import Plan
from serving.spec.profile import ModelSpec

RATE_WINDOW = "5m"


def rate(name: str, match: str, by: str = "") -> str:
    grouping = f" by ({by})" if by else ""
    return f"sum{grouping}(rate({name}{{{match}}}[{RATE_WINDOW}]))"


def quantile(q: float, histogram: str, match: str) -> str:
    return (
        f"histogram_quantile({q}, sum by (le)(rate({histogram}_bucket{{{match}}}[{RATE_WINDOW}])))"
    )


def resource_name_of(text: str) -> str:
    """Text as a lower-case slug for resource names."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def engine_match(spec: ModelSpec) -> str:
    return f'model_name="{spec.name}"'


# Serve's ingress deployment (direct streaming's LLMRouter, or the OpenAI ingress): not a model
# replica, so not counted with them.
INGRESS_DEPLOYMENTS = "LLMRouter|OpenAiIngress"


def serve_match(spec: ModelSpec) -> str:
    """The model's replicas in Serve's metrics: its application, less the ingress."""
    return f'application="{spec.name}", deployment!~"{INGRESS_DEPLOYMENTS}"'


def serve_haproxy_match(spec: ModelSpec) -> str:
    # Ray Serve's HAProxy names a backend http-<application>, and adds a
    # -via-ingress-request-router one where a request router picks the replica.
    return f'proxy=~"http-{re.escape(spec.name)}(-via-ingress-request-router)?"'


def edge_match(spec: ModelSpec) -> str:
    # The controller names a backend <namespace>_svc_<service>_<port>.
    return f'proxy=~"{SERVING_NAMESPACE}_svc_{serve_service_name(spec)}_.*"'


def max_serve_replicas(model_plan: Plan) -> int:
    """Serve replicas at the model's maximum: Ray counts DP ranks as replicas."""
    return sum(g.placement.max_replicas * g.parallelism.data for g in model_plan.groups)
