"""A deployed service stand-in for `bench --url`: the simulated engine behind a key check
(`gated_engine.py`), started once for the module's tests, and the runs they share."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_support import copy_repo, run
from repo import REPO

from infra.platform.config import load_stack
from serving.local.engine.simulation import settings_from_plan

KEY = "servestack-test-key-0c9f"
MODEL_PROFILE = "llama-3.1-8b"
# The plan's engine timings, a tenth of them: real enough to stream token by token, quick
# enough for a hundred requests in seconds on two cores.
TIME_SCALE = 0.1
READY_S = 60.0


def served(endpoint: str) -> dict[str, int]:
    with urllib.request.urlopen(f"{endpoint}/served", timeout=5) as reply:
        counts: dict[str, int] = json.loads(reply.read())
    return counts


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    spec = load_stack("dev", REPO).profiles[MODEL_PROFILE]
    settings = settings_from_plan(spec, time_scale=TIME_SCALE)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = tmp_path_factory.mktemp("engine") / "engine.log"
    env = os.environ | settings.to_env() | {"PYTHONPATH": str(REPO)}
    command = [sys.executable, str(Path(__file__).with_name("gated_engine.py")), spec.name,
               str(port), KEY]  # fmt: skip
    with log.open("w") as output:
        server = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT)
    address = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + READY_S
        while True:
            with contextlib.suppress(urllib.error.URLError, OSError):
                served(address)
                break
            assert server.poll() is None, log.read_text()[-2000:]
            assert time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.3)
        yield address
    finally:
        server.terminate()
        server.wait(10)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_repo(tmp_path_factory.mktemp("repo"))


def bench(root: Path, url: str, out: str, *flags: str, key: str = KEY):
    """`servestack bench dev --url URL --model llama-3.1-8b` from the copy of the repo."""
    return run(
        root, "bench", "dev", "--url", url, "--model", MODEL_PROFILE, "--out", out, *flags,
        extra_env={"SERVESTACK_API_KEY": key},
    )  # fmt: skip


# 25 requests of multi-prompt are 50 sent, twice: the 100 answered a calibration needs.
GOOD_RUN = ("--workload", "multi-prompt", "--requests", "25", "--repeats", "2",
            "--concurrency", "4")  # fmt: skip


@pytest.fixture(scope="module")
def good_run(root: Path, endpoint: str) -> tuple[Path, int, subprocess.CompletedProcess[str]]:
    """A clean closed-loop run: its bench.json, the requests the server answered during it, and
    the command's result."""
    before = served(endpoint)["answered"]
    result = bench(root, endpoint, "runs/good", *GOOD_RUN)
    assert result.returncode == 0, result.stderr[-2000:]
    return root / "runs/good/bench.json", served(endpoint)["answered"] - before, result
