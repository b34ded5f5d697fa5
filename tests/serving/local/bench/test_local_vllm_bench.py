"""`servestack bench --local --engine vllm` in short, as a user runs it: the bare vLLM server and
the fast path (one replica each) on a few decode-heavy requests, with the real engine.

Two engine starts (1-4 minutes each on two cores) put it past what CI spends on one test:
marked `vllm_long`, run with `pytest -m vllm_long`.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_support import servestack_command
from local_support import written_by_default
from repo import REPO

from serving.local.bench.real_engine import BARE, FAST_ONE

pytestmark = [pytest.mark.vllm_long, pytest.mark.timeout(1800)]

REQUESTS = 4
RATIO = "decode-heavy: fast path/bare vLLM, requests/s"


def test_the_fast_path_is_measured_against_bare_vllm_on_the_same_requests(
    tmp_path: Path,
) -> None:
    before = written_by_default()
    done = subprocess.run(
        [*servestack_command(), "bench", "--local", "--engine", "vllm", "--workload",
         "decode-heavy", "--variant", BARE, "--variant", FAST_ONE, "--requests", str(REQUESTS),
         "--concurrency", "2", "--repeats", "1", "--out", str(tmp_path), "--json"],
        cwd=REPO, capture_output=True, text=True, timeout=1700, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    document = json.loads(done.stdout)
    reports = {r["variant"]: r for r in document["reports"]}
    assert set(reports) == {BARE, FAST_ONE}
    for report in reports.values():
        assert report["workload"] == "decode-heavy"
        assert report["requests"] == REQUESTS and report["failed"] == 0, report["errors"]
        assert report["requests_per_s"] > 0 and report["ttft_s"]["p50"] is not None
    # Every request asks ignore_eos: both configurations generate the same tokens, so their
    # figures compare the serving paths, not the outputs.
    tokens = {name: r["output_tokens_per_s"] * r["duration_s"] for name, r in reports.items()}
    assert tokens[BARE] == pytest.approx(tokens[FAST_ONE], rel=0.01)
    assert set(document["ratios"]) == {RATIO}
    assert document["ratios"][RATIO] > 0
    assert (tmp_path / "bench.json").is_file() and (tmp_path / "bench.png").is_file()
    assert written_by_default() - before == set(), "the bench wrote outside its places"
