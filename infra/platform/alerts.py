"""The alert policies of a stack, each a PromQL condition with a runbook line. Their metrics
come from `serving.observability.metrics`' catalog, like the dashboard's (`monitoring.py`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from infra.kube.manifests import resource_name
from infra.platform.pool_specs import GpuPoolSpec
from infra.platform.promql import (
    edge_match,
    engine_match,
    max_serve_replicas,
    quantile,
    rate,
    resource_name_of,
    serve_match,
)
from serving import catalog
from serving.catalog.environment import (
    RAY_SERVE_HAPROXY_INGRESS_REQUEST_ROUTER_BUFSIZE as BUFSIZE,
)
from serving.catalog.environment import (
    RAY_SERVE_INGRESS_REQUEST_ROUTER_FORWARD_BODY as FORWARD_BODY,
)
from serving.compile.compiler import CompiledModel
from serving.compile.environment import forwards_body
from serving.compile.routers import SERVESTACK_ROUTERS
from serving.observability import metrics
from serving.observability.metrics import engine
from serving.spec.profile import ModelSpec


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
        name, eng, serve = resource_name(spec), engine_match(spec), serve_match(spec)
        edge = edge_match(spec)
        five_xx = edge + ', code="5xx"'
        ttft = engine("vllm:time_to_first_token_seconds")
        rules += [
            AlertRule(
                f"{name}-ttft", f"{spec.name}: TTFT p99 above {spec.latency.ttft_ms:g} ms",
                f"{quantile(0.99, ttft, eng)} > {spec.latency.ttft_ms / 1e3:g}", 600, "WARNING",
                "Requests wait for a first token longer than the profile's latency.ttft_ms. Check "
                "'Requests running and waiting' and 'Replicas': if replicas sit at max, raise "
                "autoscaling.max_replicas (and the GPU quota); if waiting grows below max, lower "
                "autoscaling.target_ongoing_requests.",
            ),
            AlertRule(
                f"{name}-5xx", f"{spec.name}: over 1% of edge responses are 5xx",
                f"{rate(metrics.HAPROXY_RESPONSES, five_xx)} / "
                f"{rate(metrics.HAPROXY_RESPONSES, edge)} > 0.01",
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
        if spec.router.kind in SERVESTACK_ROUTERS:
            rules += router_rules(spec)
        if forwards_body(spec):
            rules.append(truncation_rule(spec))
        hit_rate = prefix_hit_rate_rule(spec)
        if hit_rate is not None:
            rules.append(hit_rate)
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


# The share of one decision among a router's placements that raises each routing alert.
BLIND_SHARE = 0.01
SPILL_SHARE = 0.5


def router_rules(spec: ModelSpec) -> list[AlertRule]:
    """Routing efficacy as an SLO: servestack's prefix router counts what it decides
    (`metrics.ROUTER_DECISIONS`). A router that sees no prompt places every request as new, and
    cache affinity is gone without an error anywhere: that is an ERROR. Most placements past
    the holders' load bound mean the prompts' traffic outgrew their replicas: a WARNING."""
    name, app = resource_name(spec), f'application="{spec.name}"'

    def share(decision: str) -> str:
        chosen = f'{app}, decision="{decision}"'
        return f"{rate(metrics.ROUTER_DECISIONS, chosen)} / {rate(metrics.ROUTER_DECISIONS, app)}"

    return [
        AlertRule(
            f"{name}-router-blind", f"{spec.name}: the prefix router sees no prompts",
            f"{share(metrics.ROUTER_NO_PROMPT)} > {BLIND_SHARE:g}", 600, "ERROR",
            "servestack's router is placing requests without their prompt, so every request "
            "is placed as a new prompt and the prefix cache is no longer aimed at. The request "
            f"body is not reaching the router: check {FORWARD_BODY}=1 on the Ray head "
            "(`servestack render`), and that clients send chat or completion requests with "
            "their messages in the body.",
        ),
        AlertRule(
            f"{name}-router-spilling",
            f"{spec.name}: most shared prompts spill past their replicas' load bound",
            f"{share(metrics.ROUTER_SPILL)} > {SPILL_SHARE:g}", 900, "WARNING",
            "Most requests of prompts the router has seen go to a replica that does not hold "
            "them, because every replica holding them is past the load bound: expect a lower "
            "prefix-cache hit rate and a longer TTFT. Raise autoscaling.min_replicas, or "
            "router.imbalance_ratio if the replicas have room.",
        ),
    ]  # fmt: skip


# How far below the plan's prefix-cache hit rate the measured one may stay, and for how long,
# before the alert fires: absolute, over the rate window, so that a quiet hour's few requests
# or one new system prompt do not page anyone.
HIT_RATE_MARGIN = 0.1
HIT_RATE_FOR_S = 1800


def prefix_hit_rate_rule(spec: ModelSpec) -> AlertRule | None:
    """The plan assumed a prefix-cache hit rate (workload.prefix_cache_hit_rate): fire when
    vLLM's measured rate (hits over queries, in prompt tokens) stays below it by more than the
    margin. None where the plan assumes none, or one within the margin of zero."""
    planned = spec.workload.prefix_cache_hit_rate
    if planned is None or planned <= HIT_RATE_MARGIN:
        return None
    floor = planned - HIT_RATE_MARGIN
    eng = engine_match(spec)
    measured = (
        f"{rate(engine('vllm:prefix_cache_hits'), eng)} / "
        f"{rate(engine('vllm:prefix_cache_queries'), eng)}"
    )
    return AlertRule(
        f"{resource_name(spec)}-prefix-hit-rate",
        f"{spec.name}: prefix-cache hit rate below the plan's {planned:g}",
        f"{measured} < {floor:g}", HIT_RATE_FOR_S, "WARNING",
        f"vLLM serves less of the prompts from its prefix cache than the plan assumed "
        f"(workload.prefix_cache_hit_rate {planned:g}), so TTFT and throughput fall short of "
        "it. If the router alerts fire too, routing lost the prompts; if not, the traffic "
        "changed (fewer shared prefixes) or the KV cache is too small to keep them: check "
        "'Prefix-cache hit rate' and 'KV cache usage', and correct the profile's assumption.",
    )  # fmt: skip


# The share of routed bodies cut at HAProxy's buffer that raises the truncation alert.
TRUNCATED_SHARE = 0.01


def truncation_rule(spec: ModelSpec) -> AlertRule:
    """Ray Serve's HAProxy reads a request's body into one buffer before it asks the ingress
    request router for a replica; a longer body reaches the router cut short, is no JSON, and is
    placed without its prompt (ray/llm/_internal/serve/core/ingress/router.py). Ray 2.56.1
    counts those (`metrics.INGRESS_ROUTER_TRUNCATIONS`, where the compiler turns its count on)."""
    app = f'application="{spec.name}"'
    return AlertRule(
        f"{resource_name(spec)}-bodies-truncated",
        f"{spec.name}: request bodies truncated before the router",
        f"{rate(metrics.INGRESS_ROUTER_TRUNCATIONS, app)} / "
        f"{rate(metrics.INGRESS_ROUTER_REQUESTS, app)} > {TRUNCATED_SHARE:g}", 600, "WARNING",
        "Ray Serve's HAProxy cut request bodies at its buffer (256 KiB in Ray 2.56.1) before "
        "the ingress request router read them: those requests are placed without their prompt, "
        "so long prompts lose prefix affinity. Raise "
        f"{BUFSIZE} on the Ray head (memory: about twice the buffer per connection), or "
        "shorten what clients send.",
    )  # fmt: skip
