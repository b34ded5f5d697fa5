"""Every metric the dashboard and the alerts read is one the data plane really exports, proven
on the local data plane: `servestack bench --local` runs the dev stack's model on real Ray Serve
2.56.1 behind its HAProxy, the simulated engine exporting vLLM 0.22.0's engine metrics, while
`servestack top --local` watches it and this test scrapes the run's metrics endpoints.

Together with tests/infra/platform/test_observability.py (every query names only catalogued
metrics) and tests/serving/observability/test_metrics.py (each catalogued name is the one vLLM's
and Ray's source define), a panel naming a metric nobody exports fails the build. Families only a
cluster exports (KubeRay's operator, GKE's DCGM) are checked against their exporters' source
instead.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest
from cli_support import servestack_command
from repo import REPO

from infra.platform.alerts import gpu_node_minimums, prefix_hit_rate_rule
from infra.platform.config import load_stack
from infra.platform.monitoring import queries
from infra.platform.plan import compile_stack, plan_platform
from infra.platform.promql import quantile
from serving.local.runtime.observed import ObservedRun, running
from serving.observability.metrics import (
    ENGINE_METRICS,
    FAMILIES,
    INGRESS_ROUTER_TRUNCATIONS,
    REQUEST_LATENCY_BUCKETS_S,
    ROUTER_DECISIONS,
    TTFT_BUCKETS_S,
    VLLM_LABELS,
    EngineMetric,
    Family,
    metric_names,
)
from serving.observability.top import SCRAPE_ERRORS, scrape
from serving.router.prefix_affinity import AFFINITY, DECISIONS, NO_PROMPT
from serving.spec.profile import ModelSpec

STACKS = ("dev", "prod")
# servestack's router, so that its decision counter is among what the plane exports.
VARIANT = "fast-paths-on/servestack-prefix-affinity"
# Long enough a load (80 requests of 50 tokens, 8 in flight, engine steps at 4x the plan's) for
# top to draw a few tables while it runs.
BENCH_ARGS = (
    "--workload", "multi-prompt", "--variant", VARIANT, "--requests", "40", "--concurrency", "8",
    "--replicas", "2", "--prefixes", "2", "--prefix-tokens", "300", "--time-scale", "4",
    "--repeats", "1",
)  # fmt: skip
TOP_INTERVAL_S = 2
TOP_SECONDS = 10
START_TIMEOUT_S = 420.0
SCRAPE_EVERY_S = 1.0


@dataclass
class Live:
    spec: ModelSpec
    run: ObservedRun
    bench_exit: int
    bench_output: str
    report: dict[str, Any]
    top_output: str
    scraped: set[str] = field(default_factory=set)
    # Each engine family's label sets, as scraped.
    engine_labels: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    # The label sets of servestack's router decision counter, as scraped.
    router_labels: list[dict[str, str]] = field(default_factory=list)
    # The status the service answered the oversized request with.
    oversized_status: int | None = None
    # Per endpoint, the scrapes it answered and how the others failed.
    answered: dict[str, int] = field(default_factory=dict)
    failures: dict[str, list[str]] = field(default_factory=dict)
    # Why an earlier start was run again (see the fixture), and where its agent's stack went.
    rerun_because: str = ""
    # Ray's metrics agent's threads, dumped at the first scrape it did not answer.
    agent_stack: str = ""

    def scrape_record(self) -> str:
        """Each endpoint's scrapes, for a failure's message."""
        lines = [
            f"{name}: {self.answered.get(name, 0)} scrapes answered, "
            f"{len(self.failures.get(name, []))} failed"
            + (f" (last: {self.failures[name][-1]})" if self.failures.get(name) else "")
            for name in self.run.metrics
        ]
        return "\n".join([*lines, self.rerun_because] if self.rerun_because else lines)


def _started_by(pid: int, timeout_s: float, process: subprocess.Popen[str]) -> ObservedRun:
    """The local run the bench process `pid` started (its child registers it once ready)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        for run in running():
            try:
                if psutil.Process(run.pid).ppid() == pid:
                    return run
            except psutil.NoSuchProcess:
                continue
        time.sleep(1.0)
    raise AssertionError(f"servestack bench --local started no local run (exit {process.poll()})")


def oversized_request(endpoint: str) -> int:
    """A chat request whose body is twice what Ray Serve's HAProxy buffers for the ingress
    request router (Ray's own default, which local runs keep): the router gets it cut short and
    places it without its prompt. It names no served model, so the engine answers it with an
    error and counts nothing: the bench's figures stay the bench's."""
    from ray.serve._private.constants import RAY_SERVE_HAPROXY_INGRESS_REQUEST_ROUTER_BUFSIZE

    words = "word " * (2 * RAY_SERVE_HAPROXY_INGRESS_REQUEST_ROUTER_BUFSIZE // 5)
    body = {"model": "not-served", "messages": [{"role": "user", "content": words}],
            "max_tokens": 1}  # fmt: skip
    request = urllib.request.Request(
        f"{endpoint}/v1/chat/completions", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def _watch(live: Live, bench: subprocess.Popen[str]) -> None:
    """Scrape the run's endpoints until the bench ends, keeping every name and label set seen.
    (Ray shows a gauge in the first scrape after a process pushed it: names are collected over
    the whole run, not from one scrape.) Once, while the bench runs, a request too long for the
    router to read whole is sent beside it."""
    while bench.poll() is None:
        if live.oversized_status is None:
            live.oversized_status = oversized_request(live.run.endpoint)
        for endpoint, url in live.run.metrics.items():
            try:
                samples = scrape(url)
            except SCRAPE_ERRORS as exc:  # a slow agent, or the run stopping
                live.failures.setdefault(endpoint, []).append(repr(exc))
                if endpoint == "ray" and len(live.failures[endpoint]) == 1:
                    live.agent_stack = agent_stack(url)
                continue
            live.answered[endpoint] = live.answered.get(endpoint, 0) + 1
            for name, labels in samples:
                live.scraped.add(name)
                if name.startswith("ray_vllm_"):
                    live.engine_labels.setdefault(name, []).append(dict(labels))
                if name == ROUTER_DECISIONS:
                    live.router_labels.append(dict(labels))
        time.sleep(SCRAPE_EVERY_S)


def agent_stack(url: str) -> str:
    """The threads of the process listening on `url`'s port, by py-spy (installed with Ray's
    dashboard), or why not: what a stalled agent was doing, for the failure's message."""
    port = urllib.parse.urlsplit(url).port
    spy = Path(sys.executable).with_name("py-spy")
    try:
        listening = psutil.net_connections("tcp")
        (pid,) = {
            c.pid for c in listening if c.status == psutil.CONN_LISTEN and c.laddr.port == port
        }
        dump = subprocess.run(
            [str(spy), "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=60
        )
    except (ValueError, OSError, psutil.Error, subprocess.SubprocessError) as exc:
        return f"no stack of the agent on port {port}: {exc!r}"
    return dump.stdout or dump.stderr


def _observe(out: Path, spec: ModelSpec) -> Live:
    """One `servestack bench --local` with `servestack top` beside it, watched."""
    env = os.environ | {"COLUMNS": "160"}
    bench_log, top_log = out / "bench.txt", out / "top.txt"
    with bench_log.open("w") as bench_out, top_log.open("w") as top_out:
        bench = subprocess.Popen(
            [*servestack_command(), "bench", "--local", "--model", spec.name, *BENCH_ARGS,
             "--out", str(out)],
            stdout=bench_out, stderr=subprocess.STDOUT, text=True, cwd=REPO, env=env,
        )  # fmt: skip
        top: subprocess.Popen[str] | None = None
        try:
            run = _started_by(bench.pid, START_TIMEOUT_S, bench)
            top = subprocess.Popen(
                [*servestack_command(), "top", "--local", "--interval", str(TOP_INTERVAL_S),
                 "--seconds", str(TOP_SECONDS)],
                stdout=top_out, stderr=subprocess.STDOUT, text=True, cwd=REPO, env=env,
            )  # fmt: skip
            live = Live(spec, run, 0, "", {}, "")
            _watch(live, bench)
            live.bench_exit = bench.wait()
            top.wait(timeout=TOP_SECONDS * 3)
        finally:
            for process in (bench, top):
                if process is not None and process.poll() is None:
                    # SIGINT: the bench stops its local Ray on the way out.
                    process.send_signal(2)
                    process.wait(timeout=300)
    live.bench_output, live.top_output = bench_log.read_text(), top_log.read_text()
    document = json.loads((out / "bench.json").read_text()) if live.bench_exit == 0 else {}
    (live.report,) = document.get("reports", [{}])
    return live


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Live:
    """The run the tests read. Ray's metrics agent serves scrapes one at a time, and on a loaded
    machine it has been seen to answer none for a whole run (CI, and here beside the planner's
    tests: every scrape timing out for over a minute), so that nothing Ray exports could be
    checked. Such a run, and only such a run, is started once more; the second one's record
    says so, with the first's failures and its agent's stack, and fails as it comes."""
    (spec, *_) = load_stack("dev", REPO).profiles.values()
    live = _observe(tmp_path_factory.mktemp("live"), spec)
    if live.answered.get("ray", 0) == 0:
        first = live
        live = _observe(tmp_path_factory.mktemp("live"), spec)
        live.rerun_because = (
            "started twice: Ray's metrics agent answered no scrape during the first run\n"
            f"{first.scrape_record()}\nits threads then:\n{first.agent_stack}"
        )
        print(live.rerun_because)
    return live


def unexported(
    expressions: Iterable[str], scraped: set[str], families: Mapping[str, Family] = FAMILIES
) -> dict[str, str]:
    """The metric names the expressions read that the local plane did not export, each with
    why: not in the catalog at all, or a family the local plane should export and did not.
    Families only a cluster exports are left to the source checks."""
    known = {series: family for family in families.values() for series in family.series()}
    found = {}
    for expression in expressions:
        for name in metric_names(expression):
            if name not in known:
                found[name] = f"in no exporter's catalog ({expression})"
            elif known[name].local and name not in scraped:
                found[name] = f"{known[name].origin}: not exported by the local plane"
    return found


def _dashboard_and_alerts() -> list[str]:
    found = []
    for stack in STACKS:
        loaded = load_stack(stack, REPO)
        minimums = gpu_node_minimums(plan_platform(loaded).gpu_pools)
        found += queries(list(compile_stack(loaded).values()), minimums)
    # No shipped profile assumes a prefix-cache hit rate: the alert one that does gets.
    (spec, *_) = load_stack("dev", REPO).profiles.values()
    assuming = spec.model_copy(
        update={"workload": spec.workload.model_copy(update={"prefix_cache_hit_rate": 0.5})}
    )
    rule = prefix_hit_rate_rule(assuming)
    assert rule is not None
    return [*found, rule.query]


def test_the_bench_served_every_request(live: Live) -> None:
    assert live.bench_exit == 0, live.bench_output
    assert live.report["failed"] == 0


def test_every_metric_the_dashboard_and_alerts_read_is_exported(live: Live) -> None:
    assert unexported(_dashboard_and_alerts(), live.scraped) == {}, live.scrape_record()


def test_a_panel_reading_a_metric_nobody_exports_fails_the_same_check(live: Live) -> None:
    """vLLM 0.22.0 defines a prefill-time histogram the local engine does not export: catalogued
    and drawn like TTFT, it is caught; so is a name outside any catalog."""
    prefill = EngineMetric(
        "vllm:request_prefill_time_seconds", "histogram", "Prefill time.",
        REQUEST_LATENCY_BUCKETS_S,
    )  # fmt: skip
    catalog = {**FAMILIES, prefill.scraped: Family(prefill.scraped, "histogram", "vllm", "vLLM")}
    panel = quantile(0.99, prefill.scraped, 'model_name="m"')
    typo = quantile(0.99, "ray_vllm_time_to_first_token", 'model_name="m"')
    found = unexported([*_dashboard_and_alerts(), panel, typo], live.scraped, catalog)
    assert set(found) == {f"{prefill.scraped}_bucket", "ray_vllm_time_to_first_token_bucket"}
    assert "not exported by the local plane" in found[f"{prefill.scraped}_bucket"]


def test_engine_metrics_carry_vllms_labels_and_this_model(live: Live) -> None:
    for metric in ENGINE_METRICS.values():
        labels = [
            label
            for name, seen in live.engine_labels.items()
            if name.startswith(metric.scraped)
            for label in seen
        ]
        assert labels, metric.scraped
        assert all(set(VLLM_LABELS) <= set(label) for label in labels)
        assert {label["model_name"] for label in labels} == {live.spec.name}


def test_the_router_counts_its_decisions_under_this_application(live: Live) -> None:
    """What the routing alerts read: servestack's router, inside the run's LLMRouter, exports a
    count per decision labelled with the model's application; on two shared prompts, repeats
    of a prompt its holder took (`affinity`)."""
    assert live.router_labels, "the router's decision counter was never scraped"
    assert {labels["application"] for labels in live.router_labels} == {live.spec.name}
    decisions = {labels["decision"] for labels in live.router_labels}
    assert AFFINITY in decisions and decisions <= set(DECISIONS)


def _rates(output: str, model: str) -> list[tuple[float, float]]:
    """(requests/s, output tokens/s) of each of the model's rows top drew."""
    rows = [line for line in output.splitlines() if model in line]
    cells = [re.findall(r"[│|]\s*([\d,]+\.?\d*)\s", row)[:2] for row in rows]
    return [(float(a.replace(",", "")), float(b.replace(",", ""))) for a, b in cells]


def test_top_showed_live_non_zero_rates_while_the_bench_ran(live: Live) -> None:
    rates = _rates(live.top_output, live.spec.name)
    assert rates, live.top_output
    assert any(requests > 0 and tokens > 0 for requests, tokens in rates), live.top_output


def test_the_bench_reads_the_engines_metrics_as_the_dashboard_does(live: Live) -> None:
    report = live.report
    engine = report["engine_metrics"]
    assert engine is not None, live.bench_output
    # Exactly the load's requests, not the warm-up's: the scrapes bracket the load.
    assert engine["requests"] == report["requests"] - report["failed"]
    # Two ways of counting cached prompt tokens, the engine's counters and the responses' usage,
    # agree; the report's hit rate is the counters'.
    assert engine["prefix_hit_rate"] == pytest.approx(report["client_cache_hit_rate"], abs=1e-9)
    assert report["cache_hit_rate"] == engine["prefix_hit_rate"] > 0
    # Each request's first token reached the engine's clock before the client's, so the
    # engine's median falls at or below the top of the TTFT bucket holding the client's median;
    # and it had left the queue before, so likewise for the queue time's p99 (below the client's
    # maximum where its samples are too few for a p99).
    ttft = report["ttft_s"]
    client_p50, client_tail = ttft["p50"], ttft["p99"] if ttft["p99"] is not None else ttft["max"]
    assert 0 < engine["ttft_p50_s"] <= min(b for b in TTFT_BUCKETS_S if b >= client_p50)
    bound = min(b for b in REQUEST_LATENCY_BUCKETS_S if b >= client_tail)
    assert 0 < engine["queue_p99_s"] <= bound


def test_a_body_cut_short_at_haproxy_is_placed_without_its_prompt(live: Live) -> None:
    """What the truncation and blind-router alerts read, moved by one request whose body
    Ray Serve's HAProxy cuts at its buffer before the ingress request router reads it: Ray
    counts the truncation, and servestack's router counts a placement with no prompt (the
    router's fallback when the body does not reach it whole, as with forwarding off)."""
    assert live.oversized_status is not None and live.oversized_status >= 400
    assert INGRESS_ROUTER_TRUNCATIONS in live.scraped
    decisions = {labels["decision"] for labels in live.router_labels}
    assert NO_PROMPT in decisions, decisions
