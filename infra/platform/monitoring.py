"""What a stack's serving plane is scraped from, and what is drawn and alerted on.

- `pod_monitorings`: GKE managed Prometheus PodMonitorings for every Ray head and worker (Ray's
  metrics export, which carries Serve's and vLLM's metrics, and Ray Serve's HAProxy exporter)
  and the KubeRay operator (the HAProxy edge's, on its stat port inside the cluster, is
  `infra/kube/edge.py`'s);
- `dashboard`: one Cloud Monitoring dashboard per stack, PromQL panels per model;
- `alert_rules`: the alert policies, each with a runbook line.

Every query names its metrics through `serving.observability.metrics`, whose catalog a test checks
against what Ray 2.56.1, vLLM 0.22.0 and HAProxy really export. The Pulumi component that registers
these objects is `infra/deploy/components/observability.py`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from infra.kube.manifests import resource_name, serve_service_name
from infra.kube.namespaces import KUBERAY_NAMESPACE, SERVING_NAMESPACE
from infra.platform.pool_specs import GpuPoolSpec
from serving import catalog
from serving.catalog.pins import KUBERAY_CHART
from serving.catalog.ray_ports import METRICS, SERVE_HAPROXY_METRICS
from serving.compile.compiler import CompiledModel
from serving.observability import metrics
from serving.observability.metrics import engine
from serving.plan.planner import Plan
from serving.spec.profile import ModelSpec

MONITORING_API_VERSION = "monitoring.googleapis.com/v1"
SCRAPE_INTERVAL = "30s"
# The kuberay-operator container's metrics port (controller-runtime's /metrics).
KUBERAY_METRICS_PORT = 8080
RATE_WINDOW = "5m"


# Managed Prometheus bills per sample ingested. A Ray node exports about 2,300 series (2,279 on
# the local plane) of which the panels and alerts need Serve's and vLLM's (745); Serve's HAProxy
# exports 682, of which 46 are the response counts by code. Only the families read are kept.
KEEP_RAY = "ray_(vllm|serve)_.*"
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


# --- queries --------------------------------------------------------------------------------


def _rate(name: str, match: str, by: str = "") -> str:
    grouping = f" by ({by})" if by else ""
    return f"sum{grouping}(rate({name}{{{match}}}[{RATE_WINDOW}]))"


def _quantile(q: float, histogram: str, match: str) -> str:
    return (
        f"histogram_quantile({q}, sum by (le)(rate({histogram}_bucket{{{match}}}[{RATE_WINDOW}])))"
    )


def resource_name_of(text: str) -> str:
    """Text as a lower-case slug for resource names."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _engine_match(spec: ModelSpec) -> str:
    return f'model_name="{spec.name}"'


# Serve's ingress deployment (direct streaming's LLMRouter, or the OpenAI ingress): not a model
# replica, so not counted with them.
INGRESS_DEPLOYMENTS = "LLMRouter|OpenAiIngress"


def _serve_match(spec: ModelSpec) -> str:
    """The model's replicas in Serve's metrics: its application, less the ingress."""
    return f'application="{spec.name}", deployment!~"{INGRESS_DEPLOYMENTS}"'


def _serve_haproxy_match(spec: ModelSpec) -> str:
    # Ray Serve's HAProxy names a backend http-<application>, and adds a
    # -via-ingress-request-router one where a request router picks the replica.
    return f'proxy=~"http-{re.escape(spec.name)}(-via-ingress-request-router)?"'


def _edge_match(spec: ModelSpec) -> str:
    # The controller names a backend <namespace>_svc_<service>_<port>.
    return f'proxy=~"{SERVING_NAMESPACE}_svc_{serve_service_name(spec)}_.*"'


@dataclass(frozen=True)
class Panel:
    """One chart: its queries by legend, its unit, and a line to compare against."""

    title: str
    queries: dict[str, str]
    unit: str = ""
    threshold: float | None = None


def max_serve_replicas(model_plan: Plan) -> int:
    """Serve replicas at the model's maximum: Ray counts DP ranks as replicas."""
    return sum(g.placement.max_replicas * g.parallelism.data for g in model_plan.groups)


def model_panels(model: CompiledModel) -> list[Panel]:
    spec = model.spec
    eng, serve, edge = _engine_match(spec), _serve_match(spec), _edge_match(spec)
    ttft = engine("vllm:time_to_first_token_seconds")
    itl = engine("vllm:inter_token_latency_seconds")
    queue = engine("vllm:request_queue_time_seconds")
    return [
        Panel(
            "Edge requests/s by code", {"{{code}}": _rate(metrics.HAPROXY_RESPONSES, edge, "code")}
        ),
        Panel(
            "Serve requests/s by code",
            {"{{code}}": _rate(metrics.HAPROXY_RESPONSES, _serve_haproxy_match(spec), "code")},
        ),
        Panel(
            "Time to first token",
            {"p50": _quantile(0.5, ttft, eng), "p99": _quantile(0.99, ttft, eng)},
            "s", spec.latency.ttft_ms / 1e3,
        ),
        Panel(
            "Inter-token latency",
            {"p50": _quantile(0.5, itl, eng), "p99": _quantile(0.99, itl, eng)},
            "s", spec.latency.itl_ms / 1e3,
        ),
        Panel("Output tokens/s", {"tokens/s": _rate(engine("vllm:generation_tokens"), eng)}),
        Panel(
            "Requests running and waiting",
            {
                "running": f"sum({engine('vllm:num_requests_running')}{{{eng}}})",
                "waiting": f"sum({engine('vllm:num_requests_waiting')}{{{eng}}})",
            },
        ),
        Panel(
            "Queue time",
            {"p50": _quantile(0.5, queue, eng), "p99": _quantile(0.99, queue, eng)},
            "s",
        ),
        Panel(
            "KV-cache usage (fullest replica)",
            {"max": f"max({engine('vllm:kv_cache_usage_perc')}{{{eng}}})"}, "1", 1.0,
        ),
        Panel(
            "Prefix-cache hit rate",
            {
                "hit rate": f"{_rate(engine('vllm:prefix_cache_hits'), eng)} / "
                f"{_rate(engine('vllm:prefix_cache_queries'), eng)}"
            },
            "1",
        ),
        Panel(
            "Replicas (running, target; line: max)",
            {
                "running": f"sum({metrics.SERVE_REPLICA_HEALTHY}{{{serve}}})",
                "target": f"sum({metrics.SERVE_TARGET_REPLICAS}{{{serve}}})",
            },
            threshold=max_serve_replicas(model.plan),
        ),
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
            {"reloads": f"60 * {_rate(metrics.SERVE_HAPROXY_RELOADS, '')}"},
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


# --- alert policies -------------------------------------------------------------------------


@dataclass(frozen=True)
class AlertRule:
    """One alert policy: a PromQL condition that fires when it returns a series for `for_s`."""

    name: str
    title: str
    query: str
    for_s: int
    severity: str
    runbook: str


def gpu_node_minimums(pools: Iterable[GpuPoolSpec]) -> dict[str, int]:
    """The fewest GPU nodes the stack's pools keep, by the GPU's product name as DCGM reports it
    (pools of one GPU, an a3-highgpu and an a3-megagpu say, count together)."""
    minimums: dict[str, int] = {}
    for pool in pools:
        gpu = catalog.ACCELERATORS[pool.machine.accelerator].product_name
        minimums[gpu] = minimums.get(gpu, 0) + pool.kept_nodes
    return minimums


def alert_rules(models: Iterable[CompiledModel], gpu_minimums: dict[str, int]) -> list[AlertRule]:
    """The alert policies of a stack; `gpu_minimums` is `gpu_node_minimums` of its pools."""
    rules: list[AlertRule] = []
    for model in models:
        spec, most = model.spec, max_serve_replicas(model.plan)
        name, eng, serve = resource_name(spec), _engine_match(spec), _serve_match(spec)
        edge = _edge_match(spec)
        five_xx = edge + ', code="5xx"'
        ttft = engine("vllm:time_to_first_token_seconds")
        rules += [
            AlertRule(
                f"{name}-ttft", f"{spec.name}: TTFT p99 above {spec.latency.ttft_ms:g} ms",
                f"{_quantile(0.99, ttft, eng)} > {spec.latency.ttft_ms / 1e3:g}", 600, "WARNING",
                "Requests wait for a first token longer than the profile's latency.ttft_ms. Check "
                "'Requests running and waiting' and 'Replicas': if replicas sit at max, raise "
                "autoscaling.max_replicas (and the GPU quota); if waiting grows below max, lower "
                "autoscaling.target_ongoing_requests.",
            ),
            AlertRule(
                f"{name}-5xx", f"{spec.name}: over 1% of edge responses are 5xx",
                f"{_rate(metrics.HAPROXY_RESPONSES, five_xx)} / "
                f"{_rate(metrics.HAPROXY_RESPONSES, edge)} > 0.01",
                300, "ERROR",
                "The edge answers 5xx. 502 bursts right after a replica change are HAProxy "
                "reloads cutting streams (ray#66056); steady 5xx: `kubectl -n llm get rayservice "
                f"{name}` and the Serve replica logs on the Ray head.",
            ),
            AlertRule(
                f"{name}-pinned-at-max", f"{spec.name}: replicas pinned at the maximum",
                f"sum({metrics.SERVE_TARGET_REPLICAS}{{{serve}}}) >= {most}",
                900, "WARNING",
                "Autoscaling wants every replica the profile allows. If TTFT holds, fine; if not, "
                "raise autoscaling.max_replicas and check the GPU pool can grow (quota, Spot).",
            ),
            AlertRule(
                f"{name}-kv-cache-full", f"{spec.name}: KV cache above 95%",
                f"max({engine('vllm:kv_cache_usage_perc')}{{{eng}}}) > 0.95", 600, "WARNING",
                "vLLM is about to preempt sequences. Lower autoscaling.target_ongoing_requests or "
                "max_num_seqs, or give the model more KV memory (kv_cache_dtype: fp8, more TP).",
            ),
            AlertRule(
                f"{name}-not-ready", f"{spec.name}: RayService not ready",
                f'max({metrics.KUBERAY_SERVICE_READY}{{name="{name}", condition="false"}}) > 0',
                600, "CRITICAL",
                f"KubeRay reports the RayService not ready: `kubectl -n llm describe rayservice "
                f"{name}`; look for pods pending on GPUs, image pulls or weights failing to load.",
            ),
        ]  # fmt: skip
    for gpu, minimum in sorted(gpu_minimums.items()):
        if minimum < 1:
            continue
        slug = resource_name_of(gpu)
        rules.append(
            AlertRule(
                f"gpu-nodes-{slug}-below-min", f"{gpu} nodes below the pools' minimum {minimum}",
                f"count(count by (Hostname)({metrics.GPU_UTIL}"
                f'{{modelName="{gpu}"}})) < {minimum}',
                900, "ERROR",
                f"Fewer nodes report {gpu} GPUs than the node pools keep at least: Spot "
                "preemption, a stock-out in the zone, or a failed driver install. Check the GPU "
                "node pools' events in the console and `kubectl get nodes -l "
                "cloud.google.com/gke-accelerator`.",
            )
        )  # fmt: skip
    return rules


def queries(models: list[CompiledModel], gpu_minimums: dict[str, int]) -> list[str]:
    """Every PromQL expression the dashboard and the alert policies evaluate."""
    found = [q for model in models for panel in model_panels(model) for q in panel.queries.values()]
    found += [q for panel in stack_panels() for q in panel.queries.values()]
    found += [rule.query for rule in alert_rules(models, gpu_minimums)]
    return found
