"""What the simulated engine models, and nothing of Ray: tokens, a prefix cache, timing.

This is a SIMULATION of an inference engine, not an engine. It exists so that the Ray Serve side
(HAProxy, direct streaming, the request router, the OpenAI API) can run for real on a CPU and be
measured. Its numbers are only as good as the planner's estimates it is fed from.

- Tokens are whitespace-separated words: no tokenizer download, and a prompt of N words is N tokens,
  so workloads say exactly how long their prompts are.
- The prefix cache is vLLM's idea in miniature: full blocks of `block_tokens` tokens, each keyed by
  a hash chained over all the blocks before it, evicted least recently used once the cache holds
  `cache_tokens` tokens. A request's hit is the leading run of blocks already cached.
- Time: prefill costs `prefill_s_per_token` per uncached prompt token, one prefill at a time per
  replica (prefill is compute-bound, so concurrent prefills only share the same GPU); each output
  token costs one decode step, which grows with the number of sequences decoding on the replica.
  All of it is multiplied by `time_scale`.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from serving.planner import choose_machine, decode_step_s, plan, prefill_s
from serving.spec import ModelSpec

# The environment variable that carries the settings to every replica (Ray passes the driver's
# environment to the processes of a local cluster it starts).
SETTINGS_ENV = "SERVESTACK_SIMULATION"
# vLLM's default KV-cache block size.
DEFAULT_BLOCK_TOKENS = 16
# Batch size at which the decode-step slope is measured from the planner.
SLOPE_BATCH = 64


class SimulationSettings(BaseModel):
    """The simulated engine's timing and cache, derived from a plan or given by flags."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    prefill_s_per_token: float = Field(ge=0, description="Prefill time per uncached token.")
    decode_step_s: float = Field(ge=0, description="One decode step with one sequence running.")
    decode_s_per_sequence: float = Field(
        ge=0, description="What each further running sequence adds to a decode step."
    )
    cache_tokens: int = Field(ge=0, description="Prefix-cache capacity of one replica, in tokens.")
    block_tokens: int = Field(default=DEFAULT_BLOCK_TOKENS, ge=1)
    time_scale: float = Field(default=1.0, ge=0, description="Multiplies every simulated delay.")

    def to_env(self) -> dict[str, str]:
        return {SETTINGS_ENV: self.model_dump_json()}

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> SimulationSettings:
        raw = (os.environ if environ is None else environ).get(SETTINGS_ENV)
        if not raw:
            raise RuntimeError(
                f"{SETTINGS_ENV} is not set: the simulated engine is started by "
                "`servestack serve --local`, which derives its timing from the model's plan"
            )
        return cls.model_validate(json.loads(raw))

    def decode_step(self, running: int) -> float:
        """Seconds of one decode step with `running` sequences on the replica."""
        extra = max(running, 1) - 1
        return (self.decode_step_s + extra * self.decode_s_per_sequence) * self.time_scale

    def prefill(self, uncached_tokens: int) -> float:
        return uncached_tokens * self.prefill_s_per_token * self.time_scale


def settings_from_plan(
    spec: ModelSpec,
    *,
    time_scale: float = 1.0,
    cache_tokens: int | None = None,
    block_tokens: int = DEFAULT_BLOCK_TOKENS,
) -> SimulationSettings:
    """Timing from the planner's estimates for the spec's serving group (the decode side of a
    P/D pair), cache capacity from its KV-cache memory unless `cache_tokens` overrides it."""
    groups = plan(spec).groups
    group = next((g for g in groups if g.role in ("server", "decode")), groups[0])
    layout = group.parallelism
    machine = choose_machine(spec, layout.gpus_per_replica)
    chunk = spec.max_num_batched_tokens
    context = spec.workload.input_tokens + spec.workload.output_tokens // 2
    step_1 = decode_step_s(spec, machine, layout, 1, context)
    batch = min(SLOPE_BATCH, spec.max_num_seqs)
    slope = 0.0
    if batch > 1:
        slope = (decode_step_s(spec, machine, layout, batch, context) - step_1) / (batch - 1)
    capacity = group.memory.kv_capacity_tokens // layout.data
    return SimulationSettings(
        # A full chunk's marginal cost per token: what a long prompt pays for each token.
        prefill_s_per_token=prefill_s(spec, machine, layout, chunk) / chunk,
        decode_step_s=step_1,
        decode_s_per_sequence=max(slope, 0.0),
        cache_tokens=max(capacity, 0) if cache_tokens is None else cache_tokens,
        block_tokens=block_tokens,
        time_scale=time_scale,
    )


def tokenize(text: str) -> list[str]:
    """Words are tokens: cheap, deterministic, and workloads can count them."""
    return text.split()


def message_text(content: Any) -> str:
    """The text of an OpenAI message's content: a string, or a list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for part in content:
        text = part.get("text") if isinstance(part, Mapping) else getattr(part, "text", None)
        if text:
            parts.append(str(text))
    return " ".join(parts)


def chat_prompt(messages: Iterable[Any]) -> str:
    """A chat rendered as one prompt, role by role, as a chat template would."""
    lines = []
    for message in messages:
        if isinstance(message, Mapping):
            role, content = message.get("role", "user"), message.get("content")
        else:
            role, content = getattr(message, "role", "user"), getattr(message, "content", None)
        lines.append(f"<{role}> {message_text(content)}")
    return "\n".join(lines) + "\n<assistant>"


class PrefixCache:
    """Token blocks keyed by a hash chained over the prefix, evicted least recently used."""

    def __init__(self, capacity_tokens: int, block_tokens: int = DEFAULT_BLOCK_TOKENS) -> None:
        self.block_tokens = block_tokens
        self.capacity_blocks = capacity_tokens // block_tokens
        self._blocks: OrderedDict[int, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._blocks)

    def block_hashes(self, tokens: Sequence[str]) -> list[int]:
        hashes, previous = [], 0
        for start in range(0, len(tokens) - self.block_tokens + 1, self.block_tokens):
            previous = hash((previous, tuple(tokens[start : start + self.block_tokens])))
            hashes.append(previous)
        return hashes

    def admit(self, tokens: Sequence[str]) -> int:
        """Look the prompt up, then cache its blocks; returns the tokens that were cached."""
        hashes = self.block_hashes(tokens)
        hit = 0
        for block in hashes:
            if block not in self._blocks:
                break
            hit += 1
        for block in hashes:
            if block in self._blocks:
                self._blocks.move_to_end(block)
            else:
                self._blocks[block] = None
        while len(self._blocks) > self.capacity_blocks:
            self._blocks.popitem(last=False)
        return hit * self.block_tokens

    def clear(self) -> None:
        self._blocks.clear()
