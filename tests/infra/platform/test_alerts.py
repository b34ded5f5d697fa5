"""The alerts that hold routing to what the plan assumed: the measured prefix-cache hit rate
against the profile's, and request bodies HAProxy truncates before the router reads them. Each
query is the PromQL derived from the profile; the live test (tests/serving/observability/
test_metrics_live.py) finds the metrics they read exported."""

from __future__ import annotations

import pytest
from compiled_support import compile_spec
from planner_support import spec

from infra.platform.alerts import (
    HIT_RATE_FOR_S,
    HIT_RATE_MARGIN,
    AlertRule,
    alert_rules,
)
from serving.observability.metrics import known_series, metric_names


def rules(**fields: object) -> dict[str, AlertRule]:
    return {rule.name: rule for rule in alert_rules([compile_spec(spec(**fields))], {})}


def test_the_hit_rate_alert_fires_below_the_plans_rate_less_the_margin() -> None:
    rule = rules(workload={"prefix_cache_hit_rate": 0.6})["m-prefix-hit-rate"]
    hits = 'sum(rate(ray_vllm_prefix_cache_hits_total{model_name="m"}[5m]))'
    queries = 'sum(rate(ray_vllm_prefix_cache_queries_total{model_name="m"}[5m]))'
    assert rule.query == f"{hits} / {queries} < {0.6 - HIT_RATE_MARGIN:g}"
    assert rule.for_s == HIT_RATE_FOR_S
    assert "0.6" in rule.title and "workload.prefix_cache_hit_rate 0.6" in rule.runbook


@pytest.mark.parametrize("planned", [None, HIT_RATE_MARGIN])
def test_no_hit_rate_alert_where_the_plan_assumes_none_worth_holding(
    planned: float | None,
) -> None:
    assert "m-prefix-hit-rate" not in rules(workload={"prefix_cache_hit_rate": planned})


def test_a_hit_rate_with_prefix_caching_off_is_refused() -> None:
    with pytest.raises(ValueError, match="prefix_caching off"):
        spec(workload={"prefix_cache_hit_rate": 0.5}, prefix_caching=False)


@pytest.mark.parametrize(
    ("router", "direct_streaming", "watched"),
    [("servestack_prefix_affinity", True, True), ("prefix_affinity", True, True),
     ("servestack_prefix_affinity", False, False), ("power_of_two", True, False)],
)  # fmt: skip
def test_truncated_bodies_are_watched_exactly_where_haproxy_forwards_them(
    router: str, direct_streaming: bool, watched: bool
) -> None:
    found = rules(router=router, fast_paths={"direct_streaming": direct_streaming})
    assert ("m-bodies-truncated" in found) is watched
    if watched:
        rule = found["m-bodies-truncated"]
        truncated = (
            'sum(rate(ray_serve_haproxy_ingress_router_truncations_total{application="m"}[5m]))'
        )
        routed = 'sum(rate(ray_serve_haproxy_ingress_router_requests_total{application="m"}[5m]))'
        assert rule.query == f"{truncated} / {routed} > 0.01"
        # Ray counts them only where asked: the compiler asks wherever the body is forwarded.
        env = compile_spec(spec(router=router)).cluster_env
        assert env["RAY_SERVE_INGRESS_REQUEST_ROUTER_METRICS_ENABLED"] == "1"


def test_the_new_alerts_read_only_catalogued_metrics() -> None:
    found = rules(workload={"prefix_cache_hit_rate": 0.6})
    for name in ("m-prefix-hit-rate", "m-bodies-truncated"):
        assert metric_names(found[name].query) <= set(known_series()), name
