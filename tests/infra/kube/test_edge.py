"""What servestack passes the edge controller is what the pinned controller accepts (it ignores
anything else), and the edge keeps its stats off the load balancer and its keys hashed."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from infra.kube.edge import (
    API_KEY_GATE,
    api_key_hashes,
    edge_values,
    model_ingress,
)
from infra.platform.config import load_stack
from policies.edge import argument_name, effective_lines
from serving.catalog.edge_controller import (
    CHART_VERSION,
    CONFIGMAP_KEYS,
    CONTROLLER_ARGUMENTS,
    INGRESS_ANNOTATIONS,
)
from serving.catalog.pins import EDGE_CHART

REPO_STACKS = ["dev", "prod"]


def _values(internal: bool = True) -> dict[str, Any]:
    return edge_values(
        replicas=2, internal=internal, source_ranges=["203.0.113.0/24"], stream_timeout_s=600
    )


def test_the_chart_deployed_is_the_one_the_lists_were_generated_for() -> None:
    assert EDGE_CHART.version == CHART_VERSION


def test_every_controller_argument_we_pass_is_one_it_accepts() -> None:
    arguments = _values()["controller"]["extraArgs"]
    assert arguments
    assert {argument_name(a) for a in arguments} <= CONTROLLER_ARGUMENTS
    assert "--configmap-patterns" not in CONTROLLER_ARGUMENTS


def test_every_configmap_key_we_set_is_one_it_reads() -> None:
    assert set(_values()["controller"]["config"]) <= CONFIGMAP_KEYS


@pytest.mark.parametrize("stack", REPO_STACKS)
def test_every_ingress_annotation_we_set_is_one_it_reads(stack: str) -> None:
    config = load_stack(stack).config
    for spec in load_stack(stack).profiles.values():
        annotations = model_ingress(
            spec, host=None, requests_per_second=config.edge_rate_limit_rps,
            stream_timeout_s=config.stream_timeout_s,
        )["metadata"]["annotations"]  # fmt: skip
        names = {key.removeprefix("haproxy.org/") for key in annotations}
        assert names <= INGRESS_ANNOTATIONS


def test_the_stats_and_metrics_ports_are_off_the_load_balancer() -> None:
    ports = _values(internal=False)["controller"]["service"]["enablePorts"]
    assert ports["stat"] is False and ports["prometheus"] is False
    assert ports["http"] and ports["https"]


def test_the_pattern_file_holds_hashes_not_keys() -> None:
    keys = ["sk-one", "sk-two"]
    content = api_key_hashes(keys)
    assert content.splitlines() == [hashlib.sha256(k.encode()).hexdigest() for k in keys]
    assert "sk-one" not in content


def test_an_empty_key_is_refused() -> None:
    with pytest.raises(ValueError, match="empty key"):
        api_key_hashes(["sk-one", " "])


def test_the_gate_is_all_code_no_comment() -> None:
    assert effective_lines(API_KEY_GATE) == API_KEY_GATE.strip().splitlines()


def test_the_generated_lists_are_sorted_sets_of_names() -> None:
    # A damaged regeneration (a flag's description taken for its name) shows up here.
    assert all(a.startswith("-") and " " not in a for a in CONTROLLER_ARGUMENTS)
    assert all(" " not in a and a == a.lower() for a in INGRESS_ANNOTATIONS | CONFIGMAP_KEYS)
