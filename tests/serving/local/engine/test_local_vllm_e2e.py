"""`servestack serve --local --engine vllm` on the default stack: the compiled application with
vLLM 0.22's CPU build as its engine (a tiny Llama in place of Llama 3.1 8B), behind Ray's HAProxy
with direct streaming, called with the official `openai` client, and measured by `servestack
bench --url` through its HTTP address only, as a deployed service is.

The answers are checked against what only the real engine serving the kit's model produces:
token counts from the kit's own tokenizer and chat template, greedy decoding that streams the
same text it returns whole, vLLM's prefix cache hitting on a repeated prompt. The bench's report
is checked against the engine's own counters, scraped from the run. After Ctrl-C, nothing of the
run may be left (`vllm_serve_support`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import psutil
import pytest
import yaml
from cli_support import copy_repo, interruptible, run, servestack_command
from vllm_serve_support import MODEL, STACK, Running, served_by_vllm

from serving.catalog import pins
from serving.observability.metrics import engine

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(1500)]

# vLLM's extension: generate exactly max_tokens (random weights may pick EOS at any step).
EXACT = {"ignore_eos": True, "temperature": 0.0}
# vLLM's CPU platform's default KV block size: a prefix hit counts whole blocks.
CPU_BLOCK_TOKENS = 128


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    with served_by_vllm(tmp_path_factory.mktemp("vllm")) as served:
        yield served


def chat_prompt_tokens(tokenizer: Any, messages: list[dict[str, str]]) -> int:
    return len(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True))


def test_the_profiles_model_is_served_by_vllm(running: Running) -> None:
    assert [model.id for model in running.client.models.list()] == [MODEL]
    chat = running.client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Hi."}], max_tokens=2
    )
    assert (chat.system_fingerprint or "").startswith("vllm-0.22.0")


def test_chat_usage_counts_the_kits_tokens(running: Running) -> None:
    messages = [
        {"role": "system", "content": "You answer briefly."},
        {"role": "user", "content": "Tell me a story about a model and a cache."},
    ]
    chat = running.client.chat.completions.create(
        model=MODEL,
        messages=messages,
        max_tokens=9,
        extra_body=EXACT,  # type: ignore[arg-type]
    )
    assert chat.usage is not None
    assert chat.usage.prompt_tokens == chat_prompt_tokens(running.tokenizer, messages)
    assert chat.usage.completion_tokens == 9
    assert chat.usage.total_tokens == chat.usage.prompt_tokens + 9
    assert chat.choices[0].finish_reason == "length"
    assert chat.choices[0].message.content


def test_streamed_chat_is_the_same_greedy_answer(running: Running) -> None:
    messages = [{"role": "user", "content": "Count for me."}]
    whole = running.client.chat.completions.create(
        model=MODEL,
        messages=messages,
        max_tokens=12,
        extra_body=EXACT,  # type: ignore[arg-type]
    )
    stream = running.client.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=12, stream=True,  # type: ignore[arg-type]
        stream_options={"include_usage": True}, extra_body=EXACT,
    )  # fmt: skip
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 12

    # The client hides the terminator; the wire shows it.
    body = {"model": MODEL, "messages": messages, "max_tokens": 3, "stream": True}
    with httpx.stream("POST", f"{running.endpoint}/v1/chat/completions", json=body) as response:
        lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    assert all(json.loads(line[6:])["object"] == "chat.completion.chunk" for line in lines[:-1])


def test_completions_count_the_prompt_and_hit_the_prefix_cache(running: Running) -> None:
    # Long enough for several KV blocks (the CPU build's are 128 tokens), so the second request
    # can hit all but the last, partial one.
    prompt = " ".join(f"story t{i}" for i in range(400))
    first = running.client.completions.create(
        model=MODEL,
        prompt=prompt,
        max_tokens=4,
        extra_body=EXACT,  # type: ignore[arg-type]
    )
    assert first.usage is not None
    assert first.usage.prompt_tokens == len(running.tokenizer(prompt)["input_ids"])
    assert first.usage.completion_tokens == 4
    second = running.client.completions.create(
        model=MODEL,
        prompt=prompt,
        max_tokens=4,
        extra_body=EXACT,  # type: ignore[arg-type]
    )
    details = second.usage.prompt_tokens_details if second.usage else None
    cached = details.cached_tokens if details is not None else 0
    assert cached is not None
    assert first.usage.prompt_tokens - CPU_BLOCK_TOKENS <= cached < first.usage.prompt_tokens
    assert second.choices[0].text == first.choices[0].text


def test_malformed_and_unknown_model_requests_get_openai_errors(running: Running) -> None:
    with pytest.raises(openai.BadRequestError):
        running.client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "x"}],
            max_tokens="many",  # type: ignore[arg-type]
        )
    with pytest.raises(openai.NotFoundError):
        running.client.chat.completions.create(
            model="gpt-5", messages=[{"role": "user", "content": "x"}], max_tokens=2
        )


def test_the_real_engine_exports_every_engine_metric_the_catalog_names(running: Running) -> None:
    """vLLM itself, its metrics through Ray Serve LLM's `log_engine_metrics`, scraped from the
    run's Ray: the names, vLLM's labels and the model's name the dashboard filters on are the
    ones the simulated engine exports. A request whose prompt is cached streams meanwhile
    (vLLM sets its gauges only on engine steps, Ray exports a gauge only in the first scrape
    after it is pushed, and a counter only once it has counted something)."""
    from serving.local.runtime.observed import running as local_runs
    from serving.observability.metrics import ENGINE_METRICS, FAMILIES, VLLM_LABELS
    from serving.observability.top import scrape

    (run,) = [r for r in local_runs() if r.endpoint == running.endpoint]
    # Two KV blocks of prompt, asked twice: the second time hits vLLM's prefix cache.
    messages = [{"role": "user", "content": "Count slowly. " * (CPU_BLOCK_TOKENS // 2)}]
    running.client.chat.completions.create(model=MODEL, messages=messages, max_tokens=1)  # type: ignore[arg-type]
    request = threading.Thread(
        target=lambda: running.client.chat.completions.create(
            model=MODEL, messages=messages, max_tokens=64, extra_body=EXACT,  # type: ignore[arg-type]
        )
    )  # fmt: skip
    request.start()
    labels: dict[str, list[dict[str, str]]] = {}
    deadline = time.monotonic() + 5
    while request.is_alive() or time.monotonic() < deadline:
        for name, label in scrape(run.metrics["ray"]):
            labels.setdefault(name, []).append(dict(label))
        time.sleep(0.3)
    wanted = {s for m in ENGINE_METRICS.values() for s in FAMILIES[m.scraped].series()}
    assert wanted - set(labels) == set()
    for name in wanted:
        assert all(set(VLLM_LABELS) <= set(label) for label in labels[name]), name
        assert {label["model_name"] for label in labels[name]} == {MODEL}, name


# --- `servestack bench --url` against the run, through its HTTP address only -----------------

# 25 multi-prompt requests are 50 sent, twice: the 100 answered a calibration needs. Two system
# prompts of 300 words, several of the CPU build's KV blocks each, for the prefix cache to hit.
URL_RUN = ("--workload", "multi-prompt", "--requests", "25", "--repeats", "2",
           "--concurrency", "4", "--prefixes", "2", "--prefix-tokens", "300")  # fmt: skip
BENCH_TIMEOUT_S = 300
# Ray's exporter pushes a process's metrics every second on a local run (local_ray.py).
SETTLE_S = 20.0


@dataclass(frozen=True)
class UrlRun:
    root: Path
    document: dict[str, Any]
    # The engine's own counts over the run: requests it finished, prompt tokens it found cached.
    engine_requests: float
    engine_cached_tokens: float


def engine_total(running: Running, vllm_name: str) -> float:
    """One of vLLM's counters, summed over the run's engines, as the run's Ray exports it."""
    from serving.local.runtime.observed import running as local_runs
    from serving.observability.top import patiently, scrape

    (observed,) = [r for r in local_runs() if r.endpoint == running.endpoint]
    url = observed.metrics["ray"]
    samples = patiently(lambda: scrape(url), lambda _: True, SETTLE_S)
    assert samples is not None, f"the run's Ray metrics ({url}) never answered in {SETTLE_S:g} s"
    name = engine(vllm_name)
    return sum(v for (series, labels), v in samples.items()
               if series == name and dict(labels).get("model_name") == MODEL)  # fmt: skip


def settled(running: Running, vllm_name: str, expected: float) -> float:
    """The counter once it reaches `expected`, else as it stands after `SETTLE_S` (pushes come
    a second apart, so a count that is still short then is short)."""
    from serving.observability.top import patiently

    value = patiently(lambda: engine_total(running, vllm_name), lambda v: v == expected, SETTLE_S)
    assert value is not None
    return value


def steady(running: Running, vllm_name: str) -> float:
    """The counter once two readings two pushes apart agree: what earlier tests sent is in."""
    deadline, last = time.monotonic() + SETTLE_S, None
    while (value := engine_total(running, vllm_name)) != last and time.monotonic() < deadline:
        last = value
        time.sleep(2.0)
    return value


def bench(root: Path, url: str, out: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*servestack_command(), "bench", STACK, "--url", url, "--model", MODEL, "--out", out,
         *flags],
        cwd=root, capture_output=True, text=True, timeout=BENCH_TIMEOUT_S, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def url_run(running: Running, tmp_path_factory: pytest.TempPathFactory) -> UrlRun:
    root = copy_repo(tmp_path_factory.mktemp("url-run"))
    requests = steady(running, "vllm:request_success")
    cached = steady(running, "vllm:prefix_cache_hits")
    result = bench(root, running.endpoint, "runs/url", *URL_RUN)
    assert result.returncode == 0, result.stderr[-3000:]
    document = json.loads((root / "runs/url/bench.json").read_text())
    (row,) = document["summary"]
    answered = settled(running, "vllm:request_success", requests + row["requests"]) - requests
    hits = settled(running, "vllm:prefix_cache_hits", cached + row["cached_tokens"]) - cached
    return UrlRun(root, document, answered, hits)


def test_the_bench_counts_what_the_engine_counted(url_run: UrlRun) -> None:
    """Requests and cached prompt tokens as the bench's report has them (from each response's
    usage) are the ones vLLM's own counters moved by over the run."""
    (row,) = url_run.document["summary"]
    assert row["requests"] == url_run.engine_requests == 100
    assert row["failed"] == 0 and row["errors_by_status"] == {}
    assert row["cached_tokens"] == url_run.engine_cached_tokens > 0
    layout = {"tensor": 1, "pipeline": 1, "data": 1, "expert": 1}
    assert url_run.document["deployment"][0]["layout"] == layout
    # The real engine answers /version through Ray Serve (the stand-in of tests/serving/measure
    # does not): the version is the server's own.
    assert url_run.document["vllm_version_source"] == "reported by the server"


def test_a_calibration_from_the_run_scales_the_next_plan_by_its_ratios(url_run: UrlRun) -> None:
    """What tests/serving/measure/test_calibrate.py shows on a stand-in engine, here from the
    real engine's run: each estimate times its recorded ratio, and the run named."""
    root = url_run.root

    def planned() -> dict[str, Any]:
        result = run(root, "plan", STACK, "--model", MODEL, "--json")
        assert result.returncode == 0, result.stderr
        (model_plan,) = json.loads(result.stdout)["plans"]
        return dict(model_plan)

    before = planned()
    result = run(root, "calibrate", "runs/url/bench.json")
    assert result.returncode == 0, result.stderr
    record = yaml.safe_load((root / "stacks/calibrations" / f"{MODEL}.yaml").read_text())
    after = planned()
    ratios = record["ratios"]
    assert after["ttft_s"] == pytest.approx(before["ttft_s"] * ratios["ttft_p50"], rel=1e-12)
    assert after["itl_s"] == pytest.approx(before["itl_s"] * ratios["itl_p50"], rel=1e-12)
    assert after["requests_per_s"] == pytest.approx(
        before["requests_per_s"] * ratios["requests_per_s"], rel=1e-12
    )
    # The version the server reports at /version (vLLM's app behind Ray Serve answers it).
    assert record["vllm_version"] == pins.VLLM and record["requests"] == 100
    shown = run(root, "plan", STACK, "--model", MODEL).stdout
    assert f"calibrated by runs/url/bench.json ({record['date']}; {record['command']})" in shown


def test_a_request_the_service_refuses_is_counted_by_its_status(
    running: Running, url_run: UrlRun
) -> None:
    before = steady(running, "vllm:request_success")
    result = bench(url_run.root, f"{running.endpoint}/no-such-route", "runs/refused",
                   "--workload", "decode-heavy", "--requests", "3", "--repeats", "1")  # fmt: skip
    assert result.returncode == 1
    (row,) = json.loads((url_run.root / "runs/refused/bench.json").read_text())["summary"]
    assert row["errors_by_status"] == {"404": 3} and row["failed"] == 3
    assert steady(running, "vllm:request_success") == before


def test_ctrl_c_leaves_no_request_running(running: Running, url_run: UrlRun) -> None:
    """Stopped mid-run, the bench ends its load generator, and the engine stops generating for
    it: its token counter stands still, and a request sent next finishes with no other request
    running or waiting beside it (vLLM's gauges, set at each engine step)."""
    command = [*servestack_command(), "bench", STACK, "--url", running.endpoint, "--model",
               MODEL, "--out", "runs/stopped", "--workload", "decode-heavy", "--requests",
               "20", "--repeats", "1", "--concurrency", "4"]  # fmt: skip
    bench_process = subprocess.Popen(
        command, cwd=url_run.root, env=os.environ, stderr=subprocess.PIPE, text=True,
        preexec_fn=interruptible,
    )  # fmt: skip
    assert bench_process.stderr is not None
    for line in bench_process.stderr:
        if line.strip().startswith("2/20"):
            break
    children = psutil.Process(bench_process.pid).children(recursive=True)
    assert any("serving.local.bench.loadgen" in " ".join(c.cmdline()) for c in children)
    bench_process.send_signal(signal.SIGINT)
    rest = bench_process.stderr.read()
    assert bench_process.wait(30) == 130, rest
    time.sleep(0.2)
    assert [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE] == []
    assert not (url_run.root / "runs/stopped/bench.json").exists()
    # Two pushes apart, the engine's generated tokens stand still: nothing is decoding.
    time.sleep(2.5)
    generated = engine_total(running, "vllm:generation_tokens")
    time.sleep(2.5)
    assert engine_total(running, "vllm:generation_tokens") == generated
    gauges = last_gauges(running)
    assert gauges == {"vllm:num_requests_running": 0.0, "vllm:num_requests_waiting": 0.0}


def last_gauges(running: Running) -> dict[str, float]:
    """vLLM's running and waiting gauges as its last step set them, a probe request's: Ray
    exports a gauge in the first scrape after it is pushed, so scrapes go on until the probe is
    answered and a few pushes after."""
    from serving.local.runtime.observed import running as local_runs
    from serving.observability.top import scrape

    (observed,) = [r for r in local_runs() if r.endpoint == running.endpoint]
    wanted = {engine(g): g for g in ("vllm:num_requests_running", "vllm:num_requests_waiting")}
    probe = threading.Thread(
        target=lambda: running.client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "Hi."}], max_tokens=8,
            extra_body=EXACT,  # type: ignore[arg-type]
        )
    )  # fmt: skip
    probe.start()
    last: dict[str, float] = {}
    deadline = time.monotonic() + 5
    while probe.is_alive() or time.monotonic() < deadline:
        for (series, labels), value in scrape(observed.metrics["ray"]).items():
            if series in wanted and dict(labels).get("model_name") == MODEL:
                last[wanted[series]] = value
        time.sleep(0.3)
    return last
