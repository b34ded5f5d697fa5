"""`servestack bench --url` against a stand-in deployment (the simulated engine behind a key
check, over HTTP, no Ray): what it counts is what the server saw, failures are counted by
status, the key is written nowhere, and Ctrl-C leaves no load generator behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
from cli_support import interruptible, servestack_command
from conftest import KEY, MODEL_PROFILE, bench, served

from serving.measure.run import SWEEP_LEVELS


def test_the_requests_counted_are_the_ones_the_server_answered(good_run, endpoint) -> None:
    path, answered, _ = good_run
    document = json.loads(path.read_text())
    (row,) = document["summary"]
    assert row["requests"] == answered == 100
    assert row["failed"] == 0 and row["errors_by_status"] == {}
    # The engine's prefix cache hit the shared system prompts, as its usage reports say.
    runs = document["runs"]
    assert row["cached_tokens"] == sum(r["report"]["cached_tokens"] for r in runs) > 0


def test_each_figure_stands_beside_the_plans_estimate_and_their_ratio(good_run) -> None:
    document = json.loads(good_run[0].read_text())
    (row,) = document["summary"]
    for name, estimate in row["estimates"].items():
        measured = row["figures"][name]["median"]
        assert row["ratios"][name] == measured / estimate
    # 100 samples resolve a p99 of TTFT; each repetition's 50 do not, and say "max".
    assert document["runs"][0]["report"]["ttft_s"]["p99"] is None
    assert document["deployment"][0]["machine_type"] == "a3-highgpu-1g"
    assert document["vllm_version_source"].startswith("pinned")
    assert (good_run[0].parent / "bench.png").stat().st_size > 0


def test_the_key_is_sent_and_written_nowhere(good_run, root) -> None:
    path, _, result = good_run
    assert KEY not in path.read_text()
    assert KEY not in result.stdout + result.stderr


def test_a_wrong_key_is_counted_as_401s(root, endpoint) -> None:
    result = bench(root, endpoint, "runs/wrong-key", "--workload", "decode-heavy",
                   "--requests", "3", "--repeats", "1", key="not-the-key")  # fmt: skip
    assert result.returncode == 1
    (row,) = json.loads((root / "runs/wrong-key/bench.json").read_text())["summary"]
    assert row["errors_by_status"] == {"401": 3}


def test_a_path_the_server_does_not_serve_is_counted_as_404s(root, endpoint) -> None:
    result = bench(root, f"{endpoint}/no-such-model", "runs/404", "--workload", "decode-heavy",
                   "--requests", "3", "--repeats", "1")  # fmt: skip
    assert result.returncode == 1
    (row,) = json.loads((root / "runs/404/bench.json").read_text())["summary"]
    assert row["errors_by_status"] == {"404": 3}


def test_an_open_loop_sends_every_request_at_its_rate(root, endpoint) -> None:
    before = served(endpoint)["answered"]
    result = bench(root, endpoint, "runs/open", "--workload", "multi-prompt", "--requests", "10",
                   "--repeats", "1", "--rate", "40", "--seed", "3")  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    document = json.loads((root / "runs/open/bench.json").read_text())
    (row,) = document["summary"]
    assert row["load"] == "open 40 req/s"
    assert row["requests"] == served(endpoint)["answered"] - before == 20


def test_a_sweep_doubles_its_clients_until_requests_per_s_stops_rising(root, endpoint) -> None:
    result = bench(root, endpoint, "runs/sweep", "--workload", "multi-prompt", "--requests", "4",
                   "--repeats", "1", "--sweep")  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    rows = json.loads((root / "runs/sweep/bench.json").read_text())["summary"]
    levels = [row["concurrency"] for row in rows]
    assert levels == list(SWEEP_LEVELS[: len(levels)])
    assert len(levels) >= 4  # the rule waits for three levels without a rise


def test_ctrl_c_ends_the_load_generator_and_writes_nothing(root: Path, endpoint: str) -> None:
    command = [*servestack_command(), "bench", "dev", "--url", endpoint, "--model", MODEL_PROFILE,
               "--out", "runs/stopped", "--workload", "decode-heavy", "--requests", "40",
               "--repeats", "1", "--concurrency", "2"]  # fmt: skip
    env = os.environ | {"SERVESTACK_API_KEY": KEY}
    bench_process = subprocess.Popen(
        command, cwd=root, env=env, stderr=subprocess.PIPE, text=True, preexec_fn=interruptible
    )
    assert bench_process.stderr is not None
    # Running: the first answers are in.
    for line in bench_process.stderr:
        if line.strip().startswith("4/40"):
            break
    children = psutil.Process(bench_process.pid).children(recursive=True)
    assert any("serving.local.bench.loadgen" in " ".join(c.cmdline()) for c in children)
    bench_process.send_signal(signal.SIGINT)
    rest = bench_process.stderr.read()
    assert bench_process.wait(20) == 130, rest
    assert "stopped" in rest
    time.sleep(0.2)
    left = [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    assert left == []
    assert not (root / "runs/stopped/bench.json").exists()
