"""The metric names servestack reads, and where each one comes from.

The dashboard, the alert policies, `servestack top` and the benchmark name metrics by what a
Prometheus scrape shows. Each name here says who exports it and where that exporter defines it;
a test reads those definitions in the installed Ray 2.56.1 and vLLM 0.22.0, and another scrapes
the local data plane and finds every name the local plane can export.

How a name reaches Prometheus:
- vLLM's `vllm:<name>` metrics, with `log_engine_metrics` on, go through Ray's metrics (Ray
  Serve LLM hands vLLM its `RayPrometheusStatLogger`, ray/llm/_internal/serve/engines/vllm/
  vllm_engine.py; `vllm/v1/metrics/ray_wrappers.py` swaps ':' for '_'), and Ray's exporter
  prefixes `ray_` (`NAMESPACE` in ray/_private/telemetry/open_telemetry_metric_recorder.py):
  `vllm:time_to_first_token_seconds` is scraped as `ray_vllm_time_to_first_token_seconds`.
  tests/serving/observability/test_metrics.py reads each of those in the installed Ray 2.56.1 and
  vLLM 0.22.0; the live tests scrape the names from the simulated engine and from vLLM itself.
- Ray Serve's `serve_<name>` metrics (`ray.util.metrics`) are scraped as `ray_serve_<name>`.
- HAProxy's own Prometheus exporter (Ray Serve's HAProxy and the cluster edge, both HAProxy)
  names its families `haproxy_<scope>_<name>`.
- KubeRay's operator exports `kuberay_<name>`; GKE's managed DCGM exporter `DCGM_FI_<name>`.

What Ray 2.56.1's exporter does to them (ray/_private/telemetry/
open_telemetry_metric_recorder.py): a gauge appears only in the first scrape after a process
pushed it (it is cleared once read), and a histogram is re-recorded from its bucket counts, so
its `_sum` is made of bucket midpoints. So no query divides a histogram's `_sum` by its
`_count`: percentiles come from the buckets.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from serving.catalog.pins import VLLM as VLLM_VERSION

Kind = Literal["counter", "gauge", "histogram"]
Exporter = Literal["vllm", "ray_serve", "haproxy", "kuberay", "dcgm", "servestack"]

RAY_PREFIX = "ray_"
# A Ray counter is scraped with Prometheus' `_total` suffix.
COUNTER_SUFFIX = "_total"
# Labels vLLM puts on every engine metric (vllm/v1/metrics/loggers.py, PrometheusStatLogger);
# Ray's wrapper adds the Serve replica's id.
VLLM_LABELS = ("model_name", "engine")
RAY_REPLICA_LABEL = "ReplicaId"

TTFT_BUCKETS_S = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
ITL_BUCKETS_S = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
)  # fmt: skip
# vLLM's `request_latency_buckets`: end-to-end, queue, prefill, decode and inference times.
REQUEST_LATENCY_BUCKETS_S = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
    240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip


@dataclass(frozen=True)
class EngineMetric:
    """One of vLLM's engine metrics, as vLLM 0.22.0 defines it."""

    vllm_name: str
    kind: Kind
    help: str
    buckets: tuple[float, ...] = ()
    extra_labels: tuple[str, ...] = field(default=())

    @property
    def ray_name(self) -> str:
        """The name Ray's wrapper registers (`ray.util.metrics` allows no ':')."""
        return self.vllm_name.replace(":", "_")

    @property
    def scraped(self) -> str:
        """The family name a scrape shows (a counter with Prometheus' `_total`)."""
        suffix = COUNTER_SUFFIX if self.kind == "counter" else ""
        return RAY_PREFIX + self.ray_name + suffix


# The engine metrics the dashboard, alerts and `servestack top` read. The simulated engine
# exports exactly these, with vLLM's names, labels and buckets.
ENGINE_METRICS = {
    metric.vllm_name: metric
    for metric in (
        EngineMetric("vllm:num_requests_running", "gauge", "Requests in model execution batches."),
        EngineMetric("vllm:num_requests_waiting", "gauge", "Requests waiting to be processed."),
        EngineMetric("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent."),
        EngineMetric("vllm:prefix_cache_queries", "counter", "Prefix cache queries, in tokens."),
        EngineMetric("vllm:prefix_cache_hits", "counter", "Prefix cache hits, in tokens."),
        EngineMetric("vllm:prompt_tokens", "counter", "Prefill tokens processed."),
        EngineMetric("vllm:generation_tokens", "counter", "Generation tokens processed."),
        EngineMetric(
            "vllm:request_success", "counter", "Successfully processed requests.",
            extra_labels=("finished_reason",),
        ),
        EngineMetric(
            "vllm:time_to_first_token_seconds", "histogram", "Time to first token in seconds.",
            TTFT_BUCKETS_S,
        ),
        EngineMetric(
            "vllm:inter_token_latency_seconds", "histogram", "Inter-token latency in seconds.",
            ITL_BUCKETS_S,
        ),
        EngineMetric(
            "vllm:e2e_request_latency_seconds", "histogram", "End-to-end request latency.",
            REQUEST_LATENCY_BUCKETS_S,
        ),
        EngineMetric(
            "vllm:request_queue_time_seconds", "histogram",
            "Time spent in WAITING phase for request.", REQUEST_LATENCY_BUCKETS_S,
        ),
    )
}  # fmt: skip


def engine(vllm_name: str) -> str:
    """The scraped family name of one of vLLM's engine metrics."""
    return ENGINE_METRICS[vllm_name].scraped


@dataclass(frozen=True)
class Family:
    """A metric family a query reads: its scraped name, who exports it, where the exporter
    defines it, and whether the local data plane exports it too (the live test checks those)."""

    name: str
    kind: Kind
    exporter: Exporter
    origin: str
    local: bool = True

    def series(self) -> tuple[str, ...]:
        """The names a scrape shows for this family (a histogram's buckets, sum and count)."""
        if self.kind == "histogram":
            return (f"{self.name}_bucket", f"{self.name}_sum", f"{self.name}_count")
        return (self.name,)


_VLLM_ORIGIN = f"vLLM {VLLM_VERSION} vllm/v1/metrics/loggers.py (PrometheusStatLogger)"
_SERVE = "Ray 2.56.1 ray/serve/_private/"

# Responses by code of an HAProxy backend: the edge's (a model's route), Serve's (its app).
HAPROXY_RESPONSES = "haproxy_backend_http_responses_total"
SERVE_REPLICA_HEALTHY = "ray_serve_deployment_replica_healthy"
SERVE_TARGET_REPLICAS = "ray_serve_autoscaling_target_replicas"
SERVE_HAPROXY_RELOADS = "ray_serve_haproxy_update_latency_s_count"
KUBERAY_SERVICE_READY = "kuberay_service_condition_ready"
# servestack's prefix routers count each placement by what they decided (`decision`: affinity,
# spill, new_prompt, no_prompt), per `application`: serving/router/prefix_affinity.py's
# DECISION_METRIC through Ray's exporter (tests/serving/router/test_routing.py checks the name).
ROUTER_DECISIONS = "ray_servestack_router_decisions_total"
ROUTER_NO_PROMPT, ROUTER_SPILL = "no_prompt", "spill"
# Their placements of a LoRA adapter's requests, per `application`, `adapter` and `decision`
# (adapter_held, adapter_spill, adapter_new): ADAPTER_DECISION_METRIC of the same module.
ROUTER_ADAPTER_DECISIONS = "ray_servestack_router_adapter_decisions_total"
# Ray Serve's HAProxy consulting the ingress request router (direct streaming), per
# `application`: the requests it routed, and those whose body it cut at its buffer before the
# router read it (the router then sees no prompt). Counted only where
# RAY_SERVE_INGRESS_REQUEST_ROUTER_METRICS_ENABLED=1, which the compiler sets wherever it has
# HAProxy forward the body.
INGRESS_ROUTER_REQUESTS = "ray_serve_haproxy_ingress_router_requests_total"
INGRESS_ROUTER_TRUNCATIONS = "ray_serve_haproxy_ingress_router_truncations_total"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
GPU_MEMORY_USED = "DCGM_FI_DEV_FB_USED"

FAMILIES: dict[str, Family] = {
    family.name: family
    for family in (
        *(
            Family(m.scraped, m.kind, "vllm", f"{_VLLM_ORIGIN}: {m.vllm_name}")
            for m in ENGINE_METRICS.values()
        ),
        Family(HAPROXY_RESPONSES, "counter", "haproxy", "HAProxy's Prometheus exporter "
               "(addons/promex), the edge's and Ray Serve's HAProxy alike"),
        Family(SERVE_REPLICA_HEALTHY, "gauge", "ray_serve", _SERVE + "deployment_state.py"),
        Family(SERVE_TARGET_REPLICAS, "gauge", "ray_serve", _SERVE + "deployment_state.py"),
        Family(SERVE_HAPROXY_RELOADS.removesuffix("_count"), "histogram", "ray_serve",
               _SERVE + "haproxy.py: one observation per HAProxy reload"),
        Family(INGRESS_ROUTER_REQUESTS, "counter", "ray_serve", _SERVE + "haproxy_metrics.py: "
               "one per request HAProxy's ingress request router placed"),
        Family(INGRESS_ROUTER_TRUNCATIONS, "counter", "ray_serve", _SERVE + "haproxy_metrics.py:"
               " one per body cut at tune.bufsize before the router read it"),
        Family(ROUTER_DECISIONS, "counter", "servestack", "serving/router/prefix_affinity.py "
               "(DECISION_METRIC): one per request a servestack router places"),
        Family(ROUTER_ADAPTER_DECISIONS, "counter", "servestack", "serving/router/"
               "prefix_affinity.py (ADAPTER_DECISION_METRIC): one per request for a LoRA "
               "adapter a servestack router places", local=False),
        Family(KUBERAY_SERVICE_READY, "gauge", "kuberay", "KubeRay 1.7.0 ray-operator/"
               "controllers/ray/metrics/ray_service_metrics.go", local=False),
        Family(GPU_UTIL, "gauge", "dcgm", "NVIDIA dcgm-exporter default counters (GKE's "
               "managed DCGM)", local=False),
        Family(GPU_MEMORY_USED, "gauge", "dcgm", "NVIDIA dcgm-exporter default counters (GKE's "
               "managed DCGM)", local=False),
    )
}  # fmt: skip


def known_series() -> dict[str, Family]:
    """Every series name a query may use, to the family it belongs to."""
    return {series: family for family in FAMILIES.values() for series in family.series()}


_PROMQL_WORDS = frozenset(
    [
        "sum",
        "avg",
        "max",
        "min",
        "count",
        "rate",
        "irate",
        "increase",
        "histogram_quantile",
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "and",
        "or",
        "unless",
        "bool",
        "offset",
        "vector",
        "scalar",
        "clamp_min",
        "clamp_max",
        "abs",
    ]
)
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGES = re.compile(r"\[[^\]]*\]")
_GROUPINGS = re.compile(r"\b(?:by|without|on|ignoring)\s*\([^)]*\)")
_IDENTIFIER = re.compile(r"(?<![\w.])[A-Za-z_:][\w:]*")


def metric_names(promql: str) -> set[str]:
    """The metric names a PromQL expression reads: what is left once strings, label matchers,
    ranges, groupings, functions and keywords are taken out."""
    text = _STRINGS.sub("", promql)
    text = _MATCHERS.sub("", text)
    text = _RANGES.sub("", text)
    text = _GROUPINGS.sub("", text)
    return {word for word in _IDENTIFIER.findall(text) if word not in _PROMQL_WORDS}
