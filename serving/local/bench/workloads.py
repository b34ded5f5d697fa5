"""The bench's workloads: their shapes, the default sizes, and the same seeded chat requests for
every configuration (unique prompts, or a few long shared system prompts, one of them possibly
hot, each followed by a unique question; or requests spread over more LoRA adapters than a
replica holds)."""

from __future__ import annotations

import random
from typing import Any, Literal

from pydantic import Field

from serving.errors import ServestackError, unknown_key_fix
from serving.frozen import Frozen

WorkloadName = Literal[
    "decode-heavy", "prefill-heavy", "multi-prompt", "hot-prompt", "many-adapters"
]
WORKLOADS: tuple[WorkloadName, ...] = (
    "decode-heavy",
    "prefill-heavy",
    "multi-prompt",
    "hot-prompt",
)
# The workloads of many system prompts, on which routers are compared.
SHARED_PREFIX_WORKLOADS: tuple[WorkloadName, ...] = ("multi-prompt", "hot-prompt")
# The hot prompt's share of the hot-prompt workload: with 4 replicas, twice what one replica
# should take, so a router that keeps it on its owner overloads that replica.
HOT_SHARE = 0.5
# Requests spread evenly over LoRA adapters (model `base:aN`): the one workload of a profile with
# a `lora:` section, which the bench serves `adapter_names` on (`adapter_bench_spec`).
ADAPTER_WORKLOAD: WorkloadName = "many-adapters"
# Its adapters by default: twice what the example LoRA profile keeps per replica (max_cpu_loras
# 4), so that where each adapter's requests go decides how often a replica loads one.
DEFAULT_ADAPTERS = 8


class Workload(Frozen):
    """A set of requests: unique prompts, or a few long shared prefixes and a unique question."""

    name: WorkloadName
    input_tokens: int = Field(ge=1, description="Prompt words per request (prefix included).")
    output_tokens: int = Field(ge=1)
    requests: int = Field(ge=1)
    concurrency: int = Field(ge=1, description="Requests in flight at most.")
    shared_prefixes: int = Field(default=0, ge=0, description="Distinct system prompts.")
    prefix_tokens: int = Field(default=0, ge=0, description="Words per system prompt.")
    hot_share: float = Field(
        default=0.0, ge=0, lt=1,
        description="Share of requests on the first system prompt; the rest share the others.",
    )  # fmt: skip
    adapters: int = Field(
        default=0, ge=0,
        description="LoRA adapters the requests take in turn (shuffled); 0: the base model.",
    )  # fmt: skip


def adapter_names(count: int) -> tuple[str, ...]:
    """The adapters an adapter workload names: the profile serving it lists these."""
    return tuple(f"a{index}" for index in range(count))


def adapter_order(workload: Workload, seed: int = 7) -> list[int]:
    """Which adapter each request names: each in turn, shuffled (a generator of its own, so the
    prompts are those of the same workload without adapters)."""
    if not workload.adapters:
        return []
    order = [index % workload.adapters for index in range(workload.requests)]
    random.Random(f"{seed}-{workload.name}-adapters").shuffle(order)
    return order


def _words(rng: random.Random, count: int) -> str:
    return " ".join(f"t{rng.randrange(1_000_000)}" for _ in range(count))


def prefix_order(workload: Workload, rng: random.Random) -> list[int]:
    """Which system prompt each request takes, shuffled: the hot one for `hot_share` of the
    requests, the others in a round robin for the rest (all of them when nothing is hot)."""
    if not workload.shared_prefixes:
        return []
    hot = round(workload.hot_share * workload.requests)
    others = list(range(1 if hot else 0, workload.shared_prefixes)) or [0]
    order = [0] * hot + [others[i % len(others)] for i in range(workload.requests - hot)]
    rng.shuffle(order)
    return order


def build_requests(workload: Workload, model: str, seed: int = 7) -> list[dict[str, Any]]:
    """The same chat requests for every configuration (seeded), each with a unique question
    after its system prompt (if the workload has them)."""
    rng = random.Random(f"{seed}-{workload.name}")
    prefixes = [_words(rng, workload.prefix_tokens) for _ in range(workload.shared_prefixes)]
    order = prefix_order(workload, rng)
    adapters = adapter_names(workload.adapters)
    models = [f"{model}:{adapters[i]}" for i in adapter_order(workload, seed)]
    requests = []
    for index in range(workload.requests):
        messages = []
        question_tokens = workload.input_tokens
        if prefixes:
            messages.append({"role": "system", "content": prefixes[order[index]]})
            question_tokens = max(1, workload.input_tokens - workload.prefix_tokens)
        messages.append({"role": "user", "content": _words(rng, question_tokens)})
        requests.append(
            {
                "model": models[index] if models else model,
                "messages": messages,
                "max_tokens": workload.output_tokens,
                # vLLM's extension: every configuration generates exactly max_tokens, whatever
                # the tiny model's random weights would have ended on.
                "ignore_eos": True,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
        )
    return requests


def default_workloads(
    requests: int = 24,
    concurrency: int = 12,
    shared_prefixes: int = 4,
    prefix_tokens: int = 2000,
    hot_share: float = HOT_SHARE,
) -> dict[WorkloadName, Workload]:
    """The workloads at sizes that finish in minutes on two cores. The two with shared system
    prompts send twice the requests: routing shows once each prompt has been asked a few
    times."""
    return {
        "decode-heavy": Workload(
            name="decode-heavy", input_tokens=50, output_tokens=500,
            requests=requests, concurrency=concurrency,
        ),
        "prefill-heavy": Workload(
            name="prefill-heavy", input_tokens=8000, output_tokens=50,
            requests=requests, concurrency=concurrency,
        ),
        "multi-prompt": Workload(
            name="multi-prompt", input_tokens=prefix_tokens + 50, output_tokens=50,
            requests=requests * 2, concurrency=concurrency,
            shared_prefixes=shared_prefixes, prefix_tokens=prefix_tokens,
        ),
        "hot-prompt": Workload(
            name="hot-prompt", input_tokens=prefix_tokens + 50, output_tokens=50,
            requests=requests * 2, concurrency=concurrency,
            shared_prefixes=shared_prefixes, prefix_tokens=prefix_tokens, hot_share=hot_share,
        ),
    }  # fmt: skip


def adapter_workload(
    adapters: int = 8,
    requests: int = 48,
    concurrency: int = 12,
    input_tokens: int = 200,
    output_tokens: int = 50,
) -> Workload:
    """Short unique prompts over `adapters` LoRA adapters: with more adapters than a replica
    holds, where each adapter's requests go decides how often an engine loads one."""
    return Workload(
        name=ADAPTER_WORKLOAD, input_tokens=input_tokens, output_tokens=output_tokens,
        requests=requests, concurrency=concurrency, adapters=adapters,
    )  # fmt: skip


def chosen_workloads(
    names: tuple[str, ...],
    requests: int,
    concurrency: int,
    shared_prefixes: int,
    prefix_tokens: int,
    hot_share: float,
    adapters: int = 0,
) -> dict[WorkloadName, Workload]:
    """The workloads `--workload` names (all where it names none) at the flags' sizes; a name
    that is no workload is refused, naming the flag and the workloads there are. With
    `adapters` (a profile that serves LoRA adapters), the adapter workload over that many
    adapters, and no other: a LoRA profile is benchmarked on its adapters."""
    known = (ADAPTER_WORKLOAD,) if adapters else WORKLOADS
    for name in names:
        if name not in known:
            fix = unknown_key_fix(name, known, "workloads")
            if name == ADAPTER_WORKLOAD:
                fix = "benchmark a profile with a lora: section, e.g. --stack lora"
            elif name in WORKLOADS:
                fix = f"a profile with LoRA adapters runs --workload {ADAPTER_WORKLOAD}"
            raise ServestackError("command line", "--workload", f"no workload '{name}'", fix)
    if adapters:
        return {ADAPTER_WORKLOAD: adapter_workload(adapters, requests * 2, concurrency)}
    wanted = names or tuple(WORKLOADS)
    shapes = default_workloads(requests, concurrency, shared_prefixes, prefix_tokens, hot_share)
    return {name: w for name, w in shapes.items() if name in wanted}
