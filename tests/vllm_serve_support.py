"""`servestack serve --local --engine vllm` on the default stack, started once for a module's
tests and stopped with Ctrl-C as a user stops it; on the way out, nothing of the run may be left:
none of its processes (Ray's, HAProxy, vLLM's engines), none of its /dev/shm files and nothing
it wrote to /tmp's default places. The run's are told from other runs on the machine by the
session the CLI leads (kept by a process that is orphaned): its processes, and the /dev/shm
files they were seen holding while it ran.

Every test that needs the real engine behind Ray Serve joins this one run (an engine start takes
minutes on two cores): the end-to-end checks of the served API, and `bench --url` against it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import psutil
import pytest
from compiled_support import compile_spec
from local_support import written_by_default
from repo import REPO

from serving.local.engine.tiny_models import tiny_model
from serving.local.runtime.local_ray import free_port
from serving.spec.profile import ModelSpec

STACK = "dev"
MODEL = "llama-3.1-8b"
READY_TIMEOUT_S = 900
STOP_TIMEOUT_S = 300


@dataclass(frozen=True)
class Running:
    endpoint: str
    client: openai.OpenAI
    tokenizer: Any


def session_processes(sid: int) -> list[str]:
    """Live processes of the session the CLI leads: everything it started, however reparented."""
    left = []
    for process in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if os.getsid(process.pid) == sid and process.status() != psutil.STATUS_ZOMBIE:
                left.append(f"{process.pid} {' '.join(process.cmdline())[:120]}")
        except (psutil.NoSuchProcess, ProcessLookupError, PermissionError):
            continue
    return left


def shm_held(sid: int) -> set[Path]:
    """/dev/shm files the session's processes hold now: mapped (/proc's maps; psutil reads the
    far slower smaps) or open."""
    held = set()
    for process in psutil.process_iter():
        try:
            if os.getsid(process.pid) != sid:
                continue
            maps = Path(f"/proc/{process.pid}/maps").read_text().splitlines()
            paths = [fields[5] for fields in (line.split(maxsplit=5) for line in maps)
                     if len(fields) == 6]  # fmt: skip
            paths += [f.path for f in process.open_files()]
        except (psutil.Error, OSError):
            continue
        held |= {Path(p.removesuffix(" (deleted)")) for p in paths if p.startswith("/dev/shm/")}
    return held


class ShmWatch:
    """Samples the session's /dev/shm files every two seconds while the run lives."""

    def __init__(self, sid: int) -> None:
        self.sid = sid
        self.seen: set[Path] = set()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        while not self.done.wait(2.0):
            self.seen |= shm_held(self.sid)

    def stop(self) -> set[Path]:
        self.done.set()
        self.thread.join()
        return self.seen


@contextmanager
def served_by_vllm(log_dir: Path) -> Iterator[Running]:
    """The default stack's model served by vLLM's CPU build behind Ray's HAProxy with direct
    streaming, as `servestack serve --local` serves it; checked to leave nothing behind."""
    from transformers import AutoTokenizer

    from infra.platform.config import load_stack

    # The default stack as shipped: HAProxy and direct streaming are on.
    spec: ModelSpec = load_stack(STACK).profiles[MODEL]
    assert compile_spec(spec).cluster_env["RAY_SERVE_ENABLE_HA_PROXY"] == "1"
    assert compile_spec(spec).cluster_env["RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING"] == "1"
    tokenizer = AutoTokenizer.from_pretrained(tiny_model("llama"))
    port = free_port()
    log_path = log_dir / "serve.log"
    # The console script of this environment, as a user runs it.
    servestack = str(Path(sys.executable).parent / "servestack")
    command = [servestack, "serve", "--local", STACK, "--model", MODEL,
               "--engine", "vllm", "--port", str(port)]  # fmt: skip
    env = os.environ | {
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    }
    before = written_by_default()
    with log_path.open("w") as log:
        cli = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=log, text=True,
            start_new_session=True,
        )  # fmt: skip
        watch = ShmWatch(cli.pid)
        try:
            await_line(cli, "is serving the OpenAI API", log_path)
            endpoint = f"http://127.0.0.1:{port}"
            client = openai.OpenAI(base_url=f"{endpoint}/v1", api_key="unused", max_retries=0)
            assert any("haproxy" in p for p in session_processes(cli.pid))
            yield Running(endpoint, client, tokenizer)
        finally:
            cli.send_signal(signal.SIGINT)
            try:
                cli.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(cli.pid, signal.SIGKILL)
                pytest.fail(f"serve did not stop within {STOP_TIMEOUT_S} s; {log_path}")
    assert cli.returncode == 0, log_path.read_text()[-2000:]
    # Ray's agents notice their raylet is gone on their next poll; give them time to exit.
    deadline = time.monotonic() + 120
    while session_processes(cli.pid) and time.monotonic() < deadline:
        time.sleep(1)
    assert session_processes(cli.pid) == [], "the local run left processes behind"
    seen = watch.stop()
    # vLLM's engine and its worker talk over shared-memory queues (multiprocessing's psm_ files).
    assert any(path.name.startswith("psm_") for path in seen), seen
    assert {path for path in seen if path.exists()} == set(), "left /dev/shm files behind"
    # vLLM's IPC sockets and torch's headers went to the run's own directory and the build folder.
    written = written_by_default() - before
    assert written == set(), f"the local run wrote outside its places: {sorted(written)}"


def await_line(process: subprocess.Popen[str], text: str, log_path: Path) -> None:
    """Wait for the CLI to print `text` (its readiness line); fail with its log's tail."""
    assert process.stdout is not None
    stdout = process.stdout
    seen = threading.Event()

    def read() -> None:
        for line in stdout:
            if text in line:
                seen.set()
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    # The reader ends on the line or when the CLI exits (its stdout closes).
    reader.join(READY_TIMEOUT_S)
    if not seen.is_set():
        raise AssertionError(f"not serving: {log_path.read_text()[-3000:]}")
