"""`servestack serve --local --engine vllm` on the default stack: the compiled application with
vLLM 0.22's CPU build as its engine (a tiny Llama in place of Llama 3.1 8B), behind Ray's HAProxy
with direct streaming, called with the official `openai` client.

The answers are checked against what only the real engine serving the kit's model produces:
token counts from the kit's own tokenizer and chat template, greedy decoding that streams the
same text it returns whole, vLLM's prefix cache hitting on a repeated prompt. After Ctrl-C, none
of the run's processes (Ray's, HAProxy, vLLM's engines), none of its /dev/shm files and nothing
it wrote to /tmp's default places may be left. The run's are told from other runs on the machine
by the session the CLI leads (kept by a process that is orphaned): its processes, and the
/dev/shm files they were seen holding while it ran.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
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
from compiled_support import compile_spec
from local_support import written_by_default
from repo import REPO

from serving.local.engine.tiny_models import tiny_model
from serving.local.runtime.local_ray import free_port
from serving.spec.profile import ModelSpec

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(1500)]

STACK = "dev"
MODEL = "llama-3.1-8b"
READY_TIMEOUT_S = 900
STOP_TIMEOUT_S = 300
# vLLM's extension: generate exactly max_tokens (random weights may pick EOS at any step).
EXACT = {"ignore_eos": True, "temperature": 0.0}
# vLLM's CPU platform's default KV block size: a prefix hit counts whole blocks.
CPU_BLOCK_TOKENS = 128


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


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    from transformers import AutoTokenizer

    from infra.platform.config import load_stack

    # The default stack as shipped: HAProxy and direct streaming are on.
    spec: ModelSpec = load_stack(STACK).profiles[MODEL]
    assert compile_spec(spec).cluster_env["RAY_SERVE_ENABLE_HA_PROXY"] == "1"
    assert compile_spec(spec).cluster_env["RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING"] == "1"
    tokenizer = AutoTokenizer.from_pretrained(tiny_model("llama"))
    port = free_port()
    log_path = tmp_path_factory.mktemp("vllm") / "serve.log"
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
            _await_line(cli, "is serving the OpenAI API", log_path)
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
    assert written_by_default() - before == set(), "the local run wrote outside its places"


def _await_line(process: subprocess.Popen[str], text: str, log_path: Path) -> None:
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
