"""What a stack's serving plane is scraped from, and what is drawn and alerted on.

- `pod_monitorings`: GKE managed Prometheus PodMonitorings for every Ray head and worker (Ray's
  metrics export, which carries Serve's and vLLM's metrics, and Ray Serve's HAProxy exporter)
  and the KubeRay operator (the HAProxy edge's, on its stat port inside the cluster, is
  `infra/kube/edge.py`'s);
- `dashboard`: one Cloud Monitoring dashboard per stack, PromQL panels per model;
- the alert policies are `alerts.py`'s, written in the same PromQL (`promql.py`).

Every query names its metrics through `serving.observability.metrics`, whose catalog a test checks
against what Ray 2.56.1, vLLM 0.22.0 and HAProxy really export. The Pulumi component that registers
these objects is `infra/deploy/components/observability.py`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from infra.kube.namespaces import KUBERAY_NAMESPACE, SERVING_NAMESPACE
from infra.platform.alerts import alert_rules
from infra.platform.promql import (
    edge_match,
    engine_match,
    max_serve_replicas,
    quantile,
    rate,
    serve_haproxy_match,
    serve_match,
)
from serving.catalog.pins import KUBERAY_CHART
from serving.catalog.ray_ports import METRICS, SERVE_HAPROXY_METRICS
from serving.compile.compiler import CompiledModel
from serving.compile.environment import forwards_body
from serving.compile.routers import SERVESTACK_ROUTERS
from serving.observability import metrics
from serving.observability.metrics import engine

MONITORING_API_VERSION = "monitoring.googleapis.com/v1"
SCRAPE_INTERVAL = "30s"
# The kuberay-operator container's metrics port (controller-runtime's /metrics).
KUBERAY_METRICS_PORT = 8080


# Managed Prometheus bills per sample ingested. A Ray node exports about 2,300 series (2,279 on
# the local plane) of which the panels and alerts need Serve's and vLLM's (745); Serve's HAProxy
# exports 682, of which 46 are the response counts by code. Only the families read are kept.
KEEP_RAY = "ray_(vllm|serve|servestack)_.*"
KEEP_HAPROXY = "haproxy_(frontend|backend)_http_responses_total"
KEEP_KUBERAY = "kuberay_.*"


def _pod_monitoring(
    name: str, namespace: str, selector: dict[str, str], ports: dict[int, str], **extra: Any
) -> dict[str, Any]:
    return {
        "apiVersion": MONITORING_API_VERSION,
        "kind": "PodMonitoring",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": selector},
            "endpoints": [
                {
                    "port": port,
                    "path": "/metrics",
                    "interval": SCRAPE_INTERVAL,
                    "metricRelabeling": [
                        {"action": "keep", "sourceLabels": ["__name__"], "regex": keep}
                    ],
                }
                for port, keep in ports.items()
            ],
            **extra,
        },
    }


def pod_monitorings(*, kuberay_helm: bool) -> list[dict[str, Any]]:
    """The PodMonitorings of a stack's Ray nodes and operator (the edge's is the edge's own).
    The operator is scraped only where servestack installs it (GKE's Ray add-on runs its
    operator out of reach)."""
    found = [
        _pod_monitoring(
            "ray-nodes",
            SERVING_NAMESPACE,
            {"ray.io/is-ray-node": "yes"},
            {METRICS.port: KEEP_RAY, SERVE_HAPROXY_METRICS.port: KEEP_HAPROXY},
            targetLabels={
                "fromPod": [
                    {"from": "ray.io/cluster", "to": "ray_cluster"},
                    {"from": "ray.io/node-type", "to": "ray_node_type"},
                ]
            },
        ),
    ]
    if kuberay_helm:
        found.append(
            _pod_monitoring(
                KUBERAY_CHART.name, KUBERAY_NAMESPACE,
                {"app.kubernetes.io/name": KUBERAY_CHART.name},
                {KUBERAY_METRICS_PORT: KEEP_KUBERAY},
            )
        )  # fmt: skip
    return found


@dataclass(frozen=True)
class Panel:
    """One chart: its queries by legend, its unit, and a line to compare against."""

    title: str
    queries: dict[str, str]
    unit: str = ""
    threshold: float | None = None


def model_panels(model: CompiledModel) -> list[Panel]:
    spec = model.spec
    routing = (
        [Panel("Router decisions/s by decision", {"{{decision}}": rate(
            metrics.ROUTER_DECISIONS, f'application="{spec.name}"', "decision"
        )})]
        if spec.router.kind in SERVESTACK_ROUTERS
        else []
    )  # fmt: skip
    if spec.router.kind in SERVESTACK_ROUTERS and spec.lora is not None:
        routing.append(Panel("Router adapter placements/s by decision", {"{{decision}}": rate(
            metrics.ROUTER_ADAPTER_DECISIONS, f'application="{spec.name}"', "decision"
        )}))  # fmt: skip
    if forwards_body(spec):
        app = f'application="{spec.name}"'
        routing.append(Panel("Bodies cut before the router/s (of those routed)", {
            "cut": rate(metrics.INGRESS_ROUTER_TRUNCATIONS, app),
            "routed": rate(metrics.INGRESS_ROUTER_REQUESTS, app),
        }))  # fmt: skip
    eng, serve, edge = engine_match(spec), serve_match(spec), edge_match(spec)
    ttft = engine("vllm:time_to_first_token_seconds")
    itl = engine("vllm:inter_token_latency_seconds")
    queue = engine("vllm:request_queue_time_seconds")
    return [
        Panel(
            "Edge requests/s by code", {"{{code}}": rate(metrics.HAPROXY_RESPONSES, edge, "code")}
        ),
        Panel(
            "Serve requests/s by code",
            {"{{code}}": rate(metrics.HAPROXY_RESPONSES, serve_haproxy_match(spec), "code")},
        ),
        Panel(
            "Time to first token",
            {"p50": quantile(0.5, ttft, eng), "p99": quantile(0.99, ttft, eng)},
            "s", spec.latency.ttft_ms / 1e3,
        ),
        Panel(
            "Inter-token latency",
            {"p50": quantile(0.5, itl, eng), "p99": quantile(0.99, itl, eng)},
            "s", spec.latency.itl_ms / 1e3,
        ),
        Panel("Output tokens/s", {"tokens/s": rate(engine("vllm:generation_tokens"), eng)}),
        Panel(
            "Requests running and waiting",
            {
                "running": f"sum({engine('vllm:num_requests_running')}{{{eng}}})",
                "waiting": f"sum({engine('vllm:num_requests_waiting')}{{{eng}}})",
            },
        ),
        Panel(
            "Queue time",
            {"p50": quantile(0.5, queue, eng), "p99": quantile(0.99, queue, eng)},
            "s",
        ),
        Panel(
            "KV-cache usage (fullest replica)",
            {"max": f"max({engine('vllm:kv_cache_usage_perc')}{{{eng}}})"}, "1", 1.0,
        ),
        Panel(
            "Prefix-cache hit rate",
            {
                "hit rate": f"{rate(engine('vllm:prefix_cache_hits'), eng)} / "
                f"{rate(engine('vllm:prefix_cache_queries'), eng)}"
            },
            "1", spec.workload.prefix_cache_hit_rate,  # line: the rate the profile expects
        ),
        Panel(
            "Replicas (running, target; line: max)",
            {
                "running": f"sum({metrics.SERVE_REPLICA_HEALTHY}{{{serve}}})",
                "target": f"sum({metrics.SERVE_TARGET_REPLICAS}{{{serve}}})",
            },
            threshold=max_serve_replicas(model.plan),
        ),
        *routing,
    ]  # fmt: skip


def stack_panels() -> list[Panel]:
    by_host = "{{Hostname}}"
    return [
        Panel("GPU utilisation (DCGM)", {by_host: f"avg by (Hostname)({metrics.GPU_UTIL})"}, "%"),
        Panel(
            "GPU memory used (DCGM)",
            {by_host: f"sum by (Hostname)({metrics.GPU_MEMORY_USED})"}, "MiB",
        ),
        Panel(
            "Serve HAProxy reloads/min",
            {"reloads": f"60 * {rate(metrics.SERVE_HAPROXY_RELOADS, '')}"},
        ),
    ]  # fmt: skip


# --- the dashboard --------------------------------------------------------------------------

COLUMNS = 48
PANEL_WIDTH, PANEL_HEIGHT = 16, 16


def _chart(panel: Panel) -> dict[str, Any]:
    chart: dict[str, Any] = {
        "dataSets": [
            {
                "timeSeriesQuery": {"prometheusQuery": query, "unitOverride": panel.unit},
                "plotType": "LINE",
                "legendTemplate": legend,
            }
            for legend, query in panel.queries.items()
        ],
        "yAxis": {"scale": "LINEAR"},
    }
    if panel.threshold is not None:
        chart["thresholds"] = [{"value": panel.threshold, "label": "target / bound"}]
    return {"title": panel.title, "xyChart": chart}


def dashboard(stack: str, models: Iterable[CompiledModel]) -> dict[str, Any]:
    """The stack's dashboard as Cloud Monitoring's Dashboard resource (mosaic layout): a
    collapsible group per model, then the stack's GPU and HAProxy panels."""
    tiles: list[dict[str, Any]] = []
    y = 0

    def group(title: str, panels: list[Panel]) -> None:
        nonlocal y
        rows = -(-len(panels) // (COLUMNS // PANEL_WIDTH))
        tiles.append(
            {
                "xPos": 0, "yPos": y, "width": COLUMNS, "height": 4 + rows * PANEL_HEIGHT,
                "widget": {"title": title, "collapsibleGroup": {"collapsed": False}},
            }
        )  # fmt: skip
        y += 4
        for index, panel in enumerate(panels):
            column, row = index % (COLUMNS // PANEL_WIDTH), index // (COLUMNS // PANEL_WIDTH)
            tiles.append(
                {
                    "xPos": column * PANEL_WIDTH, "yPos": y + row * PANEL_HEIGHT,
                    "width": PANEL_WIDTH, "height": PANEL_HEIGHT, "widget": _chart(panel),
                }
            )  # fmt: skip
        y += rows * PANEL_HEIGHT

    for model in models:
        group(model.spec.name, model_panels(model))
    group("GPUs and HAProxy", stack_panels())
    return {
        "displayName": f"servestack {stack}",
        "mosaicLayout": {"columns": COLUMNS, "tiles": tiles},
    }


def queries(models: list[CompiledModel], gpu_minimums: dict[str, int]) -> list[str]:
    """Every PromQL expression the dashboard and the alert policies evaluate."""
    found = [q for model in models for panel in model_panels(model) for q in panel.queries.values()]
    found += [q for panel in stack_panels() for q in panel.queries.values()]
    found += [rule.query for rule in alert_rules(models, gpu_minimums)]
    return found
