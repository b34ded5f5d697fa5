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


@pytest.fixture(scope="module")
def client() -> Iterator[tuple[openai.OpenAI, str]]:
    profile = load_profile(REPO / "stacks/models/llama-3.1-8b.yaml")
    spec = ModelSpec.model_validate(
        profile.model_dump() | {"autoscaling": {"min_replicas": 1, "max_replicas": 1}}
    )
    assert spec.fast_paths.haproxy and spec.fast_paths.direct_streaming
    with local_serve(spec, None, engine="vllm", adapters=ADAPTERS) as running:
        yield openai.OpenAI(base_url=f"{running.endpoint}/v1", api_key="x"), spec.name


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
