"""LoRA adapters on the real engine, through the fast paths: vLLM 0.22's CPU build serves the tiny
Llama and two tiny adapters made here (peft, random weights under fixed seeds) behind Ray
Serve's HAProxy with direct streaming, called with the `openai` client by `base:adapter` ids.

Each adapter answers, and differently from the base model and from the other adapter for the
same prompt under greedy decoding: what only an engine that applies each adapter's weights to
its requests produces. One replica and one engine start (short form for CI).

Under direct streaming the request reaches vLLM's own app on the replica, not Ray's adapter
loader (serving/local/runtime/lora.py says why): the adapters answer from vLLM's static modules
and an adapter nobody registered gets vLLM's own 404."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from repo import REPO

from serving.local.engine.tiny_adapters import tiny_adapter
from serving.local.runtime.local_ray import local_serve
from serving.local.runtime.lora import LocalAdapter
from serving.spec.loading import load_profile
from serving.spec.profile import ModelSpec

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(1200)]

ADAPTERS = (LocalAdapter("support", 8), LocalAdapter("legal", 8))
# vLLM's extension: exactly max_tokens (random weights may pick EOS at any step).
GREEDY = {"ignore_eos": True, "temperature": 0.0, "seed": 7}
PROMPT = "Tell me a story about a model and a cache."
BASE = "llama-3.1-8b"  # the profile's name: the base model's id


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    """The run's OpenAI endpoint (HAProxy)."""
    profile = load_profile(REPO / "stacks/models/llama-3.1-8b.yaml")
    spec = ModelSpec.model_validate(
        profile.model_dump() | {"autoscaling": {"min_replicas": 1, "max_replicas": 1}}
    )
    assert spec.fast_paths.haproxy and spec.fast_paths.direct_streaming
    assert spec.name == BASE and spec.router.kind == "servestack_prefix_affinity"
    with local_serve(spec, None, engine="vllm", adapters=ADAPTERS) as running:
        yield running.endpoint


@pytest.fixture(scope="module")
def client(endpoint: str) -> tuple[openai.OpenAI, str]:
    return openai.OpenAI(base_url=f"{endpoint}/v1", api_key="x"), BASE


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
    assert ids == {base} | {f"{base}:{adapter.name}" for adapter in ADAPTERS}


def test_each_adapter_answers_differently_from_the_base_and_each_other(
    client: tuple[openai.OpenAI, str],
) -> None:
    served, base = client
    answers = {model: answer(served, model) for model in
               [base, *(f"{base}:{adapter.name}" for adapter in ADAPTERS)]}  # fmt: skip
    assert all(answers.values()), answers
    assert len(set(answers.values())) == 3, answers
    # Greedy is repeatable: an adapter's answer is its weights', not chance.
    assert answer(served, f"{base}:{ADAPTERS[0].name}") == answers[f"{base}:{ADAPTERS[0].name}"]


def test_an_unknown_adapter_gets_vllms_404(client: tuple[openai.OpenAI, str]) -> None:
    """vLLM's own words: Ray's loader would have said it found no adapter config."""
    served, base = client
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        served.chat.completions.create(
            model=f"{base}:unknown", messages=[{"role": "user", "content": "x"}], max_tokens=2
        )


def test_the_tiny_adapter_is_peft_lora_of_the_asked_rank() -> None:
    """What vLLM loads is an ordinary peft LoRA adapter of the profile's rank."""
    directory: Path = tiny_adapter("llama", "support", 8)
    config = json.loads((directory / "adapter_config.json").read_text())
    assert (config["peft_type"], config["r"]) == ("LORA", 8)
    assert (directory / "adapter_model.safetensors").exists()


def test_the_router_read_each_adapter_from_the_forwarded_body(
    endpoint: str, client: tuple[openai.OpenAI, str]
) -> None:
    """Under HAProxy + direct streaming the adapter reaches servestack's router only in the
    forwarded body: its placements are counted per adapter. One replica: an adapter's first
    request is a new home, each later one finds it held."""
    from serving.local.runtime.observed import running
    from serving.observability.metrics import ROUTER_ADAPTER_DECISIONS
    from serving.observability.top import scrape
    from serving.router.prefix_affinity import ADAPTER_DECISIONS, ADAPTER_HELD, ADAPTER_NEW

    served, base = client
    for adapter in ADAPTERS:
        for _ in range(2):
            answer(served, f"{base}:{adapter.name}")
    (run,) = [r for r in running() if r.endpoint == endpoint]
    counted: dict[tuple[str, str], float] = {}
    deadline = time.monotonic() + 30  # Ray's processes push their metrics every second here
    while time.monotonic() < deadline:
        counted = {}
        for (name, labels), value in scrape(run.metrics["ray"]).items():
            if name == ROUTER_ADAPTER_DECISIONS:
                label = dict(labels)
                assert label["application"] == base and label["decision"] in ADAPTER_DECISIONS
                counted[(label["adapter"], label["decision"])] = value
        if all(counted.get((a.name, ADAPTER_HELD), 0) >= 1 for a in ADAPTERS):
            break
        time.sleep(1)
    for adapter in ADAPTERS:
        assert counted.get((adapter.name, ADAPTER_NEW)) == 1, counted
        assert counted.get((adapter.name, ADAPTER_HELD), 0) >= 1, counted
