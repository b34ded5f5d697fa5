"""A shipped profile's compiled application, run on the CPU by a real local Ray Serve behind its
HAProxy ingress with direct streaming, called with the official `openai` client. The profile is
the one with LoRA adapters (llama-3.1-8b-lora: the base model's profile and a `lora:` section) on
two replicas, so the same run shows servestack's router reading each adapter from the forwarded
body and keeping it on one replica.

One local Ray serves the whole module (it takes most of a minute to start on two cores). It is
stopped as the benchmark stops it (SIGTERM); then it must have ended by itself, with none of the
processes it started left (not Ray's agents, not HAProxy) and nothing written outside its own
directory, which is gone, and the build folder, where Ray's session is.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import openai
import psutil
import pytest
from compiled_support import compile_spec
from local_support import written_by_default
from repo import REPO

from serving.local.bench.runner import Variant, running_variant, variant_spec
from serving.local.engine.simulation import settings_from_plan
from serving.local.runtime.local_ray import SESSION_PREFIX
from serving.local.runtime.places import RAY_DIR, ray_socket_path
from serving.spec.loading import load_profile
from serving.spec.profile import ModelSpec

PROFILE = REPO / "stacks" / "models" / "llama-3.1-8b-lora.yaml"
REPLICAS = 2
# The simulated engine's timing scaled down: these tests check behaviour, never speed.
TIME_SCALE = 0.1


@dataclass(frozen=True)
class Running:
    spec: ModelSpec
    endpoint: str
    client: openai.OpenAI


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return list(psutil.Process(pid).children(recursive=True))
    except psutil.NoSuchProcess:
        return []


def alive(processes: list[psutil.Process]) -> list[str]:
    left = []
    for process in processes:
        try:
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                left.append(f"{process.pid} {' '.join(process.cmdline())[:120]}")
        except psutil.NoSuchProcess:
            continue
    return left


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    shipped = load_profile(PROFILE)
    as_shipped = Variant(name="shipped", fast_paths=True, router=shipped.router.kind, workloads=())
    spec = variant_spec(shipped, as_shipped, REPLICAS)
    # The profile as shipped: the fast paths and servestack's router are on.
    assert spec.router.kind == "servestack_prefix_affinity" and spec.lora is not None
    assert compile_spec(spec).cluster_env["RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING"] == "1"
    assert compile_spec(spec).cluster_env["RAY_SERVE_ENABLE_HA_PROXY"] == "1"
    settings = settings_from_plan(spec, time_scale=TIME_SCALE)
    log = tmp_path_factory.mktemp("local") / "serve.log"
    started: list[psutil.Process] = []
    stopped: list[tuple[int, list[int]]] = []
    before = written_by_default()
    with running_variant(
        spec, settings, log, on_stopped=lambda code, ended: stopped.append((code, ended))
    ) as endpoint:
        client = openai.OpenAI(base_url=f"{endpoint}/v1", api_key="unused", max_retries=0)
        yield Running(spec, endpoint, client)
        # Everything the local run started, HAProxy included, descends from its runtime process
        # (other tests of the session may have a Ray of their own: not ours to judge).
        runtimes = [
            child
            for child in psutil.Process().children()
            if "serving.local.runtime.local_ray" in " ".join(child.cmdline())
        ]
        assert len(runtimes) == 1
        started = [runtimes[0], *descendants(runtimes[0].pid)]
        assert any("haproxy" in " ".join(p.cmdline()) for p in started if p.is_running())
    # The runtime shut its run down and ended its leftovers itself (Ray's SIGTERM handling once
    # aborted it 3 s into that, leaving Ray's agents orphaned): nothing was left for the
    # benchmark's own census to end, and nothing is left now.
    assert stopped == [(0, [])], log.read_text()[-3000:]
    assert alive(started) == [], "the local run left processes behind"
    assert written_by_default() - before == set(), "the local run wrote outside its places"
    (session,) = [
        line.removeprefix(SESSION_PREFIX)
        for line in log.read_text().splitlines()
        if line.startswith(SESSION_PREFIX)
    ]
    assert Path(session).parent == RAY_DIR and (Path(session) / "logs").is_dir()
    # Ray's longest socket is where the check before Ray starts puts it.
    pid = int(session.rsplit("_", 1)[1])
    assert len(ray_socket_path(RAY_DIR, pid)) == len(f"{session}/sockets/plasma_store")


def chat_body(spec: ModelSpec, **changes: object) -> dict[str, object]:
    return {
        "model": spec.name,
        "messages": [{"role": "user", "content": "Say something."}],
        "max_tokens": 7,
    } | changes


def adapter_ids(spec: ModelSpec) -> list[str]:
    assert spec.lora is not None
    return [f"{spec.name}:{adapter.name}" for adapter in spec.lora.adapters]


def test_models_lists_the_profiles_model_and_its_adapters(running: Running) -> None:
    listed = [model.id for model in running.client.models.list()]
    assert listed == [running.spec.name, *adapter_ids(running.spec)]


def test_each_adapter_stays_on_the_replica_that_holds_it(running: Running) -> None:
    """The router reads the adapter from the body HAProxy forwards and sends it where it went
    before: each adapter's requests on one replica (a router blind to it, picking one of the
    two replicas at random, would do so for both adapters 1 time in 16)."""
    served: dict[str, set[str]] = {}
    for _ in range(3):
        for model in adapter_ids(running.spec):
            answer = running.client.completions.create(model=model, prompt="Hello", max_tokens=2)
            assert answer.model == model and answer.system_fingerprint
            served.setdefault(model, set()).add(answer.system_fingerprint)
    assert all(len(replicas) == 1 for replicas in served.values()), served


def test_streamed_chat_arrives_in_order_and_ends_with_done(running: Running) -> None:
    stream = running.client.chat.completions.create(
        model=running.spec.name,
        messages=[{"role": "user", "content": "Count for me."}],
        max_tokens=12,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    words = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert words == [f" w{i}" for i in range(12)]
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 12

    # The client hides the terminator; the wire shows it.
    body = chat_body(running.spec, stream=True)
    with httpx.stream("POST", f"{running.endpoint}/v1/chat/completions", json=body) as response:
        lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    assert all(json.loads(line[6:])["object"] == "chat.completion.chunk" for line in lines[:-1])


def test_completions_and_plain_chat_answer(running: Running) -> None:
    completion = running.client.completions.create(
        model=running.spec.name, prompt="Once upon a time", max_tokens=4
    )
    assert completion.choices[0].text == " w0 w1 w2 w3"
    chat = running.client.chat.completions.create(**chat_body(running.spec))  # type: ignore[call-overload]
    assert chat.usage.completion_tokens == 7


def test_malformed_request_gets_an_openai_error(running: Running) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        running.client.chat.completions.create(**chat_body(running.spec, max_tokens="many"))  # type: ignore[call-overload]
    assert raised.value.status_code == 400
    assert isinstance(raised.value.body, dict) and "max_tokens" in raised.value.body["message"]


def test_too_long_a_request_names_the_profiles_context_length(running: Running) -> None:
    too_many = running.spec.max_model_len
    with pytest.raises(openai.BadRequestError) as raised:
        running.client.chat.completions.create(**chat_body(running.spec, max_tokens=too_many))  # type: ignore[call-overload]
    assert f"maximum context length is {running.spec.max_model_len}" in str(raised.value)


def test_unknown_model_is_not_found(running: Running) -> None:
    with pytest.raises(openai.NotFoundError):
        running.client.chat.completions.create(**chat_body(running.spec, model="gpt-5"))  # type: ignore[call-overload]
