"""Issue 33's acceptance, short form: `servestack serve --local lora --engine vllm` serves the
lora stack's profile (two adapters) with vLLM 0.22's CPU build, the tiny Llama standing in for
Llama 3.1 8B and a tiny adapter made here (peft, random weights under a fixed seed) for each of
the profile's, behind Ray Serve's HAProxy with direct streaming and servestack's adapter-aware
router; the `openai` client names them `base:adapter`.

Each adapter answers, and differently from the base model and from the other adapter for the
same prompt and seed under greedy decoding: what only an engine that applies each adapter's
weights to its requests produces. One CLI run, one engine start (CI).

Under direct streaming the request reaches vLLM's own app on the replica, not Ray's adapter
loader: the adapters answer from the static `lora_modules` the compiler emitted
(serving/compile/lora.py says why), whose paths the local run points at the tiny adapters, and
an adapter nobody registered gets vLLM's own 404."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from repo import REPO
from vllm_serve_support import await_line

from infra.platform.config import load_stack
from serving.local.engine.tiny_adapters import tiny_adapter
from serving.local.runtime.local_ray import free_port
from serving.spec.lora import Adapter
from serving.spec.profile import ModelSpec

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(1200)]

STACK = "lora"
STOP_TIMEOUT_S = 300
# vLLM's extension: exactly max_tokens (random weights may pick EOS at any step).
GREEDY = {"ignore_eos": True, "temperature": 0.0, "seed": 7}
PROMPT = "Tell me a story about a model and a cache."


def profile() -> ModelSpec:
    (spec,) = load_stack(STACK).profiles.values()
    return spec


def adapters() -> list[Adapter]:
    spec = profile()
    assert spec.lora is not None and len(spec.lora.adapters) == 2
    return spec.lora.adapters


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The run's OpenAI endpoint (HAProxy), from the CLI as a user runs it; Ctrl-C at the end."""
    spec = profile()
    assert spec.fast_paths.haproxy and spec.fast_paths.direct_streaming
    assert spec.router.kind == "servestack_prefix_affinity"
    assert spec.autoscaling.min_replicas == 1  # one replica: the router test counts on it
    port = free_port()
    log_path = tmp_path_factory.mktemp("vllm-lora") / "serve.log"
    servestack = str(Path(sys.executable).parent / "servestack")
    command = [servestack, "serve", "--local", STACK, "--engine", "vllm", "--port", str(port)]
    env = os.environ | {
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    }
    with log_path.open("w") as log:
        cli = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=log, text=True,
            start_new_session=True,
        )  # fmt: skip
        try:
            await_line(cli, "is serving the OpenAI API", log_path)
            yield f"http://127.0.0.1:{port}"
        finally:
            cli.send_signal(signal.SIGINT)
            try:
                cli.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(cli.pid, signal.SIGKILL)
                pytest.fail(f"serve did not stop within {STOP_TIMEOUT_S} s; {log_path}")
    assert cli.returncode == 0, log_path.read_text()[-2000:]


@pytest.fixture(scope="module")
def client(endpoint: str) -> tuple[openai.OpenAI, str]:
    return openai.OpenAI(base_url=f"{endpoint}/v1", api_key="x", max_retries=0), profile().name


def answer(client: openai.OpenAI, model: str) -> str:
    chat = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": PROMPT}],
        max_tokens=12,
        extra_body=GREEDY,  # type: ignore[arg-type]
    )
    assert chat.model == model
    assert chat.usage is not None and chat.usage.completion_tokens == 12
    return chat.choices[0].message.content or ""


def test_every_adapter_is_listed_under_its_base_model(client: tuple[openai.OpenAI, str]) -> None:
    served, base = client
    ids = {model.id for model in served.models.list()}
    assert ids == {base} | set(profile().adapter_model_ids)


def test_each_adapter_answers_differently_from_the_base_and_each_other(
    client: tuple[openai.OpenAI, str],
) -> None:
    served, base = client
    ids = profile().adapter_model_ids
    answers = {model: answer(served, model) for model in [base, *ids]}
    assert all(answers.values()), answers
    assert len(set(answers.values())) == 3, answers
    # Greedy is repeatable: an adapter's answer is its weights', not chance.
    assert answer(served, ids[0]) == answers[ids[0]]


def test_an_unknown_adapter_gets_vllms_404(client: tuple[openai.OpenAI, str]) -> None:
    """vLLM's own words: Ray's loader would have said it found no adapter config."""
    served, base = client
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        served.chat.completions.create(
            model=f"{base}:unknown", messages=[{"role": "user", "content": "x"}], max_tokens=2
        )


def test_the_tiny_adapter_is_peft_lora_of_the_asked_rank() -> None:
    """What vLLM loads is an ordinary peft LoRA adapter of the profile's rank."""
    for adapter in adapters():
        directory: Path = tiny_adapter("llama", adapter.name, adapter.rank)
        config = json.loads((directory / "adapter_config.json").read_text())
        assert (config["peft_type"], config["r"]) == ("LORA", adapter.rank)
        assert (directory / "adapter_model.safetensors").exists()


def test_the_router_read_each_adapter_from_the_forwarded_body(
    endpoint: str, client: tuple[openai.OpenAI, str]
) -> None:
    """Under HAProxy + direct streaming the adapter reaches servestack's router only in the
    forwarded body: its placements are counted per adapter. One replica: an adapter's first
    request is a new home, each later one finds it held."""
    from serving.local.runtime.observed import running
    from serving.observability.metrics import ROUTER_ADAPTER_DECISIONS
    from serving.observability.top import patiently, scrape
    from serving.router.prefix_affinity import ADAPTER_DECISIONS, ADAPTER_HELD, ADAPTER_NEW

    served, base = client
    served_adapters = adapters()
    for model in profile().adapter_model_ids:
        for _ in range(2):
            answer(served, model)
    (run,) = [r for r in running() if r.endpoint == endpoint]

    def decisions() -> dict[tuple[str, str], float]:
        found = {}
        for (name, labels), value in scrape(run.metrics["ray"]).items():
            if name == ROUTER_ADAPTER_DECISIONS:
                label = dict(labels)
                assert label["application"] == base and label["decision"] in ADAPTER_DECISIONS
                found[(label["adapter"], label["decision"])] = value
        return found

    def all_held(found: dict[tuple[str, str], float]) -> bool:
        return all(found.get((a.name, ADAPTER_HELD), 0) >= 1 for a in served_adapters)

    # Ray's processes push their metrics every second here.
    counted = patiently(decisions, all_held, timeout_s=30) or {}
    for adapter in served_adapters:
        assert counted.get((adapter.name, ADAPTER_NEW)) == 1, counted
        assert counted.get((adapter.name, ADAPTER_HELD), 0) >= 1, counted
