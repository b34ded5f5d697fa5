"""The metric catalog against the exporters' own source: each vLLM engine metric is defined in
the installed vLLM 0.22.0 with the name, labels and buckets the catalog (and so the simulated
engine) uses, and each Ray Serve metric in the Ray 2.56.1 file the catalog cites; Ray Serve LLM
hands vLLM Ray's stat logger, whose names Ray's exporter prefixes as the catalog says."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from typing import Any

import pytest

from serving.observability import metrics
from serving.observability.metrics import ENGINE_METRICS, FAMILIES, RAY_PREFIX


def _source(module: str) -> Path:
    found = importlib.util.find_spec(module)
    assert found is not None and found.origin is not None, module
    return Path(found.origin)


def vllm_definitions() -> dict[str, dict[str, Any]]:
    """Every metric vLLM's PrometheusStatLogger defines: name -> its buckets (a literal list, or
    the name of the variable holding it)."""
    tree = ast.parse(_source("vllm.v1.metrics.loggers").read_text())
    found: dict[str, dict[str, Any]] = {}
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call):
            continue
        keywords = {k.arg: k.value for k in call.keywords if k.arg}
        name = keywords.get("name")
        if isinstance(name, ast.Constant) and str(name.value).startswith("vllm:"):
            buckets = keywords.get("buckets")
            found[name.value] = {}
            if isinstance(buckets, ast.List):
                found[name.value]["buckets"] = ast.literal_eval(buckets)
            elif isinstance(buckets, ast.Name):
                found[name.value]["buckets_name"] = buckets.id
    return found


@pytest.mark.parametrize("vllm_name", sorted(ENGINE_METRICS))
def test_each_engine_metric_is_vllms_own(vllm_name: str) -> None:
    definitions = vllm_definitions()
    assert vllm_name in definitions, f"vLLM 0.22.0 defines no {vllm_name}"
    metric = ENGINE_METRICS[vllm_name]
    if "buckets" in definitions[vllm_name]:
        assert tuple(definitions[vllm_name]["buckets"]) == metric.buckets
    elif metric.kind == "histogram":
        # Buckets named by a variable (the request-latency list): compare with its value.
        tree = ast.parse(_source("vllm.v1.metrics.loggers").read_text())
        (assigned,) = [
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign)
            and any(
                isinstance(t, ast.Name) and t.id == definitions[vllm_name]["buckets_name"]
                for t in node.targets
            )
        ]
        assert tuple(ast.literal_eval(assigned)) == metric.buckets


def test_rays_wrapper_renames_vllms_metrics_as_the_catalog_does() -> None:
    """vLLM's Ray wrapper swaps ':' for '_'; Ray's exporter adds `ray_`."""
    from vllm.v1.metrics.ray_wrappers import RayPrometheusMetric

    for metric in ENGINE_METRICS.values():
        sanitized = RayPrometheusMetric._get_sanitized_opentelemetry_name(metric.vllm_name)
        assert metric.ray_name == sanitized
        assert metric.scraped.startswith(RAY_PREFIX + sanitized)


def test_ray_serve_llm_hands_vllm_rays_stat_logger_when_engine_metrics_are_on() -> None:
    """How vLLM's metrics reach Ray's export at all (Ray 2.56.1's vLLM engine wrapper)."""
    source = _source("ray.llm._internal.serve.engines.vllm.vllm_engine").read_text()
    switched = source.split("if self.llm_config.log_engine_metrics:", 1)[1][:600]
    assert "custom_stat_loggers = [RayPrometheusStatLogger]" in switched


def test_rays_exporter_prefixes_every_name_as_the_catalog_does() -> None:
    """Ray 2.56.1 registers each metric with Prometheus as `<NAMESPACE>_<name>`."""
    from ray._private.telemetry import open_telemetry_metric_recorder as recorder

    assert f"{recorder.NAMESPACE}_" == RAY_PREFIX
    source = Path(recorder.__file__).read_text()
    assert 'name=f"{NAMESPACE}_{name}"' in source


@pytest.mark.parametrize(
    "family", [f for f in FAMILIES.values() if f.exporter == "ray_serve"], ids=lambda f: f.name
)
def test_each_serve_metric_is_defined_where_the_catalog_says(family: metrics.Family) -> None:
    relative = family.origin.split("ray/serve/_private/", 1)[1].split(":")[0]
    source = _source("ray.serve._private.router").parent / relative
    defined = family.name.removeprefix(RAY_PREFIX).removesuffix(metrics.COUNTER_SUFFIX)
    assert f'"{defined}"' in source.read_text()
