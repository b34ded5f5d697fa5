"""Every metric the dashboard and the alerts read is one the data plane really exports, proven on
the local data plane: a shipped profile's application on real Ray Serve 2.56.1 behind its
HAProxy, the simulated engine exporting vLLM's engine metrics, load from the benchmark's request
generator, and `servestack top --local` watching it all the while.

Together with tests/infra/test_observability.py (every query names only catalogued metrics) a
panel naming a metric nobody exports fails the build. Families only a cluster exports (KubeRay's
operator, GKE's DCGM) are checked against their exporters' source instead.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_support import servestack_command

from serving.loading import load_profile
from serving.local.bench import Workload, build_requests, run_load, running_variant
from serving.local.observed import ObservedRun, running
from serving.local.simulation import settings_from_plan
from serving.metrics import ENGINE_METRICS, FAMILIES, VLLM_LABELS
from serving.spec import ModelSpec
from serving.top import scrape

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "stacks" / "models" / "llama-3.1-8b.yaml"
TIME_SCALE = 0.1
TOP_SECONDS = 12


@dataclass(frozen=True)
class Live:
    spec: ModelSpec
    endpoint: str
    run: ObservedRun
    top_output: str
    failed: int


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    spec = load_profile(PROFILE)
    settings = settings_from_plan(spec, time_scale=TIME_SCALE)
    log = tmp_path_factory.mktemp("live") / "serve.log"
    with running_variant(spec, settings, log) as endpoint:
        (run,) = [r for r in running() if r.endpoint == endpoint]
        top = subprocess.Popen(
            [*servestack_command(), "top", "--local", "--interval", "3", "--seconds",
             str(TOP_SECONDS)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO,
            env=os.environ | {"COLUMNS": "160"},
        )  # fmt: skip
        workload = Workload(
            name="multi-prompt", input_tokens=400, output_tokens=40, requests=600,
            concurrency=8, shared_prefixes=2, prefix_tokens=300,
        )  # fmt: skip
        results, _ = asyncio.run(run_load(endpoint, build_requests(workload, spec.name), 8))
        output, _ = top.communicate(timeout=120)
        (log.parent / "top.txt").write_text(output)
        yield Live(spec, endpoint, run, output, sum(1 for r in results if r.error))


def test_the_load_was_served(live: Live) -> None:
    assert live.failed == 0


def test_every_catalogued_family_the_local_plane_can_export_is_exported(live: Live) -> None:
    scraped = {name for url in live.run.metrics.values() for name, _ in scrape(url)}
    for family in FAMILIES.values():
        if family.local:
            missing = [series for series in family.series() if series not in scraped]
            assert not missing, f"{family.name} ({family.origin}) is not exported: {missing}"


def test_engine_metrics_carry_vllms_labels_and_this_model(live: Live) -> None:
    samples = scrape(live.run.metrics["ray"])
    for metric in ENGINE_METRICS.values():
        labels = [dict(lab) for name, lab in samples if name.startswith(metric.scraped)]
        assert labels, metric.scraped
        assert all(set(VLLM_LABELS) <= set(label) for label in labels)
        assert {label["model_name"] for label in labels} == {live.spec.name}


def test_top_showed_the_model_with_non_zero_rates(live: Live) -> None:
    rows = [line for line in live.top_output.splitlines() if live.spec.name in line]
    assert rows, live.top_output
    rates = [
        tuple(
            float(cell.replace(",", "")) for cell in re.findall(r"[│|]\s*([\d,]+\.?\d*)\s", row)[:2]
        )
        for row in rows
    ]
    assert any(req > 0 and tokens > 0 for req, tokens in rates), live.top_output
