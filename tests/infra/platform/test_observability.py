"""Observability as the program registers it for dev and prod: PodMonitorings GKE's managed
Prometheus accepts, one dashboard Cloud Monitoring accepts, alert policies with runbooks, and
not one query that names a metric nobody exports.

`crds/monitoring.googleapis.com_podmonitorings.yaml` is the PodMonitoring CRD of
GoogleCloudPlatform/prometheus-engine v0.17.2 (charts/operator/crds/, commit 7920a2a2), vendored
as KubeRay's is.
"""

from __future__ import annotations

import importlib
import json
import re
from functools import cache
from typing import Any

import jsonschema
import pytest
import yaml
from compiled_support import compile_spec
from crd_support import CRDS, strict_schema, with_defaults
from infra_support import RecordingMocks, pulumi_config, run, use_stack
from repo import REPO

from infra.platform.alerts import alert_rules, gpu_node_minimums
from infra.platform.config import load_stack
from infra.platform.monitoring import COLUMNS, model_panels, pod_monitorings, queries
from infra.platform.plan import compile_stack, plan_platform
from serving.observability.metrics import FAMILIES, known_series, metric_names

STACKS = ["dev", "prod"]
# The panels the dashboard draws for each model, by title.
MODEL_PANELS = {
    "Edge requests/s by code",
    "Serve requests/s by code",
    "Time to first token",
    "Inter-token latency",
    "Output tokens/s",
    "Requests running and waiting",
    "Queue time",
    "KV-cache usage (fullest replica)",
    "Prefix-cache hit rate",
    "Replicas (running, target; line: max)",
}
# The part of Cloud Monitoring's v1 Dashboard resource this program writes, with the REST
# reference's constraints (mosaic layout of at most 48 columns; a tile's widget is one chart or
# one group). pulumi-gcp types dashboard_json as a JSON string and no further.
DASHBOARD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["displayName", "mosaicLayout"],
    "additionalProperties": False,
    "properties": {
        "displayName": {"type": "string", "minLength": 1},
        "mosaicLayout": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "columns": {"type": "integer", "minimum": 1, "maximum": 48},
                "tiles": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["width", "height", "widget"],
                        "properties": {
                            **{k: {"type": "integer", "minimum": 0} for k in ("xPos", "yPos")},
                            **{k: {"type": "integer", "minimum": 1} for k in ("width", "height")},
                            "widget": {
                                "type": "object",
                                "additionalProperties": False,
                                "required": ["title"],
                                "minProperties": 2,
                                "maxProperties": 2,
                                "properties": {
                                    "title": {"type": "string"},
                                    "collapsibleGroup": {
                                        "type": "object",
                                        "properties": {"collapsed": {"type": "boolean"}},
                                        "additionalProperties": False,
                                    },
                                    "xyChart": {"$ref": "#/definitions/xyChart"},
                                },
                            },
                        },
                    },
                },
            },
        },
    },
    "definitions": {
        "xyChart": {
            "type": "object",
            "additionalProperties": False,
            "required": ["dataSets"],
            "properties": {
                "dataSets": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["timeSeriesQuery"],
                        "properties": {
                            "timeSeriesQuery": {
                                "type": "object",
                                "additionalProperties": False,
                                "required": ["prometheusQuery"],
                                "properties": {
                                    "prometheusQuery": {"type": "string", "minLength": 1},
                                    "unitOverride": {"type": "string"},
                                },
                            },
                            "plotType": {
                                "enum": ["LINE", "STACKED_AREA", "STACKED_BAR", "HEATMAP"]
                            },
                            "legendTemplate": {"type": "string"},
                        },
                    },
                },
                "thresholds": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["value"],
                        "properties": {"value": {"type": "number"}, "label": {"type": "string"}},
                    },
                },
                "yAxis": {
                    "type": "object",
                    "properties": {"scale": {"enum": ["LINEAR", "LOG10"]}},
                    "additionalProperties": False,
                },
            },
        }
    },
}


@cache
def crd_schema(plural: str) -> dict[str, Any]:
    document = yaml.safe_load((CRDS / f"monitoring.googleapis.com_{plural}.yaml").read_text())
    (served,) = [v for v in document["spec"]["versions"] if v["name"] == "v1"]
    schema: dict[str, Any] = strict_schema(served["schema"]["openAPIV3Schema"])
    return schema


def validate_pod_monitoring(manifest: dict[str, Any]) -> None:
    schema = crd_schema("podmonitorings")
    jsonschema.Draft7Validator(schema).validate(
        with_defaults(json.loads(json.dumps(manifest)), schema)
    )


def _integral(value: Any) -> Any:
    """Numbers as Kubernetes reads them: the mock engine hands every number over as a float."""
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral(v) for v in value]
    return int(value) if isinstance(value, float) and value.is_integer() else value


def registered(mocks: RecordingMocks, stack: str) -> RecordingMocks:
    use_stack(mocks, stack, pulumi_config(REPO / f"stacks/Pulumi.{stack}.yaml"))
    run(importlib.import_module("infra.__main__").main)
    return mocks


@pytest.mark.parametrize("stack", STACKS)
class TestWhatTheProgramRegisters:
    def test_every_pod_monitoring_is_one_the_crd_accepts(
        self, mocks: RecordingMocks, stack: str
    ) -> None:
        found = registered(mocks, stack).of_type(
            "kubernetes:monitoring.googleapis.com/v1:PodMonitoring"
        )
        where = {(m.inputs["metadata"]["namespace"], m.inputs["metadata"]["name"]) for m in found}
        assert where == {
            ("llm", "ray-nodes"), ("edge", "edge-haproxy"), ("kuberay-system", "kuberay-operator"),
        }  # fmt: skip
        for monitoring in found:
            manifest = {
                "apiVersion": monitoring.inputs["apiVersion"],
                "kind": monitoring.inputs["kind"],
                "metadata": monitoring.inputs["metadata"],
                "spec": monitoring.inputs["spec"],
            }
            validate_pod_monitoring(_integral(manifest))

    def test_one_dashboard_with_every_panel_for_every_model(
        self, mocks: RecordingMocks, stack: str
    ) -> None:
        board = registered(mocks, stack).one("gcp:monitoring/dashboard:Dashboard")
        document = json.loads(board.inputs["dashboardJson"])
        jsonschema.Draft7Validator(DASHBOARD_SCHEMA).validate(document)
        tiles = document["mosaicLayout"]["tiles"]
        groups = [t["widget"]["title"] for t in tiles if "collapsibleGroup" in t["widget"]]
        assert groups == [*load_stack(stack, REPO).config.models, "GPUs and HAProxy"]
        charts = [t["widget"]["title"] for t in tiles if "xyChart" in t["widget"]]
        for title in MODEL_PANELS:
            assert charts.count(title) == len(groups) - 1
        # No two tiles overlap and none leaves the grid.
        cells: set[tuple[int, int]] = set()
        for tile in (t for t in tiles if "xyChart" in t["widget"]):
            assert tile["xPos"] + tile["width"] <= COLUMNS
            mine = {
                (x, y)
                for x in range(tile["xPos"], tile["xPos"] + tile["width"])
                for y in range(tile["yPos"], tile["yPos"] + tile["height"])
            }
            assert not cells & mine
            cells |= mine

    def test_alert_policies_carry_a_runbook_and_notify_the_stacks_channels(
        self, mocks: RecordingMocks, stack: str
    ) -> None:
        registered(mocks, stack)
        config = load_stack(stack, REPO).config
        emails = mocks.of_type("gcp:monitoring/notificationChannel:NotificationChannel")
        assert sorted(c.inputs["labels"]["email_address"] for c in emails) == sorted(
            config.alert_emails
        )
        policies = mocks.of_type("gcp:monitoring/alertPolicy:AlertPolicy")
        assert policies
        for policy in policies:
            assert policy.inputs["documentation"]["content"].startswith("Runbook: ")
            (condition,) = policy.inputs["conditions"]
            promql = condition["conditionPrometheusQueryLanguage"]
            # Nothing is scraped before the first `pulumi up`: Cloud Monitoring must not refuse
            # the policy for a metric it has not seen yet.
            assert promql["disableMetricValidation"] is True
            assert promql["duration"].endswith("s")
            assert len(policy.inputs.get("notificationChannels", [])) == len(
                config.alert_emails
            ) + len(config.alert_channels)


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        (lambda m: m["spec"].pop("selector"), "'selector' is a required property"),
        (lambda m: m["spec"]["endpoints"][0].update(scheme="ftp"), "'ftp' is not one of"),
        (lambda m: m["spec"]["endpoints"][0].update(prot=8080), "Additional properties"),
    ],
)
def test_a_broken_pod_monitoring_is_refused(breakage: Any, message: str) -> None:
    (manifest, *_) = pod_monitorings(kuberay_helm=True)
    broken = json.loads(json.dumps(manifest))
    breakage(broken)
    with pytest.raises(jsonschema.ValidationError, match=message):
        validate_pod_monitoring(broken)


def test_the_ttft_alert_fires_above_the_profiles_target() -> None:
    stack = load_stack("dev", REPO)
    (spec,) = stack.profiles.values()
    tight = spec.model_copy(update={"latency": spec.latency.model_copy(update={"ttft_ms": 750})})
    for profile, seconds in ((spec, spec.latency.ttft_ms / 1e3), (tight, 0.75)):
        (rule,) = [r for r in alert_rules([compile_spec(profile)], {}) if r.name.endswith("-ttft")]
        assert rule.query.endswith(f"> {seconds:g}")


def test_the_replicas_panel_draws_the_planned_maximum() -> None:
    spec = load_stack("prod", REPO).profiles["qwen3-30b-a3b"]
    (panel,) = [p for p in model_panels(compile_spec(spec)) if p.title.startswith("Replicas")]
    # DP=8 ranks per group, each a Serve replica, at the profile's max_replicas groups.
    assert panel.threshold == spec.autoscaling.max_replicas * spec.parallelism.data


class TestEveryQueryNamesAnExportedMetric:
    @pytest.mark.parametrize("stack", STACKS)
    def test_every_panel_and_alert_reads_known_metrics(self, stack: str) -> None:
        loaded = load_stack(stack, REPO)
        minimums = gpu_node_minimums(plan_platform(loaded).gpu_pools)
        known = known_series()
        for query in queries(list(compile_stack(loaded).values()), minimums):
            names = metric_names(query)
            assert names, query
            assert names <= set(known), f"{query} names {sorted(names - set(known))}"

    def test_no_query_reads_a_histograms_sum(self) -> None:
        """Ray re-records histograms from their buckets: a `_sum` is bucket midpoints."""
        loaded = load_stack("prod", REPO)
        histograms = {f.name for f in FAMILIES.values() if f.kind == "histogram"}
        for query in queries(list(compile_stack(loaded).values()), {}):
            names = metric_names(query)
            assert not {n for n in names if n.endswith("_sum") and n[:-4] in histograms}, query

    def test_a_query_naming_an_unexported_metric_is_caught(self) -> None:
        query = 'sum(rate(ray_vllm_time_to_first_token_bucket{model_name="m"}[5m]))'
        assert metric_names(query) - set(known_series()) == {"ray_vllm_time_to_first_token_bucket"}

    def test_the_parser_sees_through_labels_groupings_and_functions(self) -> None:
        query = (
            'histogram_quantile(0.99, sum by (le)(rate(a_bucket{x="rate(b)"}[5m]))) / '
            "count(count by (Hostname)(DCGM_FI_DEV_GPU_UTIL)) > 0.5"
        )
        assert metric_names(query) == {"a_bucket", "DCGM_FI_DEV_GPU_UTIL"}


def test_no_query_reaches_for_a_label_vllm_does_not_set() -> None:
    """Engine queries filter on vLLM's own labels, which the local engine sets too."""
    stack = load_stack("dev", REPO)
    for query in queries(list(compile_stack(stack).values()), {}):
        for name, matcher in re.findall(r"(ray_vllm_\w+)\{([^}]*)\}", query):
            assert matcher.startswith("model_name="), (name, matcher)


@pytest.mark.parametrize(("router", "drawn"), [("servestack_prefix_affinity", True),
                                              ("servestack_precise_prefix", True),
                                              ("power_of_two", False)])  # fmt: skip
def test_the_router_panel_and_alerts_come_with_servestacks_routers(
    router: str, drawn: bool
) -> None:
    from planner_support import spec

    compiled = compile_spec(spec(router=router))
    titles = [panel.title for panel in model_panels(compiled)]
    assert ("Router decisions/s by decision" in titles) is drawn
    routing = {"m-router-blind", "m-router-spilling"}
    assert (routing <= {rule.name for rule in alert_rules([compiled], {})}) is drawn


def test_the_routing_panels_follow_what_the_profile_turns_on() -> None:
    """The truncation panel where HAProxy forwards the body to a router, the adapter panel
    where a servestack router places LoRA adapters, and the hit-rate panel's line at the rate
    the profile expects (none where it expects none)."""
    from planner_support import spec

    def titles(model_spec: Any) -> dict[str, Any]:
        return {p.title: p for p in model_panels(compile_spec(model_spec))}

    truncation = "Bodies cut before the router/s (of those routed)"
    adapters = "Router adapter placements/s by decision"
    blind = titles(spec(router="power_of_two"))
    assert truncation not in blind and adapters not in blind
    assert blind["Prefix-cache hit rate"].threshold is None
    routed = titles(spec(router="servestack_prefix_affinity", workload={
        "prefix_cache_hit_rate": 0.6}))  # fmt: skip
    assert set(routed[truncation].queries) == {"cut", "routed"}
    assert adapters not in routed
    assert routed["Prefix-cache hit rate"].threshold == 0.6
    lora = load_stack("lora", REPO)
    shown = {t for s in lora.profiles.values() if s.lora for t in titles(s)}
    assert adapters in shown
