"""What the simulated engine models, and nothing of Ray: tokens, a prefix cache, timing.

This is a SIMULATION of an inference engine, not an engine. It exists so that the Ray Serve side
(HAProxy, direct streaming, the request router, the OpenAI API) can run for real on a CPU and be
measured. Its numbers are only as good as the planner's estimates it is fed from.

- Tokens are whitespace-separated words: no tokenizer download, and a prompt of N words is N tokens,
  so workloads say exactly how long their prompts are.
- The prefix cache is vLLM's idea in miniature: full blocks of `block_tokens` tokens, each keyed by
  a hash chained over all the blocks before it, evicted least recently used once the cache holds
  `cache_tokens` tokens. A request's hit is the leading run of blocks already cached.
- Time: the replica runs vLLM V1's continuous batching with chunked prefill in miniature
  (`StepLoop`). Each engine step decodes one token for every running sequence and spends what is
  left of `max_num_batched_tokens` on waiting prompts, oldest first, in chunks. A step lasts one
  decode step for the batch (which grows with the number of sequences decoding) plus
  `prefill_s_per_token` for every prompt token it prefills, so a long uncached prompt slows every
  sequence decoding beside it, as it does on a GPU. A prompt's last chunk yields its first token.
  All of it is multiplied by `time_scale`.
- LoRA adapters, as vLLM 0.22 serves them (`serving.local.engine.adapter_cache`): a step runs
  sequences of at most `max_loras` adapters (the scheduler skips a waiting request whose adapter
  would exceed them); an adapter a step needs that the worker has not loaded is loaded within
  that step, so the whole batch waits `adapter_load_s` for it, and the worker keeps
  `max_cpu_loras` of them, least recently used first out. Every step of a replica serving
  adapters pays `lora_step_s` for the LoRA kernels. The prefix cache is not keyed by adapter
  here (vLLM's is): the adapter workload's prompts are unique.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from pydantic import Field

from serving.frozen import Frozen
from serving.local.engine.adapter_cache import AdapterCache
from serving.plan.placement import choose_machine
from serving.plan.planner import decode_step_s, plan, prefill_s
from serving.spec.profile import ModelSpec

# The environment variable that carries the settings to every replica (Ray passes the driver's
# environment to the processes of a local cluster it starts).
SETTINGS_ENV = "SERVESTACK_SIMULATION"
# vLLM's default KV-cache block size.
DEFAULT_BLOCK_TOKENS = 16
# Batch size at which the decode-step slope is measured from the planner.
SLOPE_BATCH = 64
# Each chunk's `system_fingerprint` is this and the replica's id, so a client sees which replica
# served it.
FINGERPRINT_PREFIX = "sim-"


class SimulationSettings(Frozen):
    """The simulated engine's timing and cache, derived from a plan or given by flags."""

    prefill_s_per_token: float = Field(ge=0, description="Prefill time per uncached token.")
    decode_step_s: float = Field(ge=0, description="One decode step with one sequence running.")
    decode_s_per_sequence: float = Field(
        ge=0, description="What each further running sequence adds to a decode step."
    )
    cache_tokens: int = Field(ge=0, description="Prefix-cache capacity of one replica, in tokens.")
    block_tokens: int = Field(default=DEFAULT_BLOCK_TOKENS, ge=1)
    max_num_batched_tokens: int = Field(ge=1, description="Tokens one engine step computes.")
    max_num_seqs: int = Field(ge=1, description="Sequences scheduled at once.")
    time_scale: float = Field(default=1.0, ge=0, description="Multiplies every simulated delay.")
    adapter_load_s: float = Field(
        default=0.0, ge=0,
        description="Loading one LoRA adapter into a worker: added to the step that needs it.",
    )  # fmt: skip
    lora_step_s: float = Field(
        default=0.0, ge=0, description="What LoRA kernels add to each step of a LoRA replica."
    )

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

    def step(
        self, decoding: int, prefill_tokens: int, adapter_loads: int = 0, lora: bool = False
    ) -> float:
        """Seconds of one engine step that decodes `decoding` sequences and prefills
        `prefill_tokens` prompt tokens, loading `adapter_loads` adapters first, with LoRA
        kernels where the replica serves adapters (`lora`)."""
        compute = (self.decode_step(decoding) if decoding else 0.0) + self.prefill(prefill_tokens)
        extra = adapter_loads * self.adapter_load_s + (self.lora_step_s if lora else 0.0)
        return compute + extra * self.time_scale


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
    context = spec.workload.decode_context_tokens
    step_1 = decode_step_s(spec, machine, layout, 1, context)
    batch = min(SLOPE_BATCH, spec.max_num_seqs)
    slope = 0.0
    if batch > 1:
        slope = (decode_step_s(spec, machine, layout, batch, context) - step_1) / (batch - 1)
    capacity = group.memory.kv_capacity_tokens // layout.data
    adapters = group.lora
    return SimulationSettings(
        # A full chunk's marginal cost per token: what a long prompt pays for each token.
        prefill_s_per_token=prefill_s(spec, machine, layout, chunk) / chunk,
        decode_step_s=step_1,
        decode_s_per_sequence=max(slope, 0.0),
        cache_tokens=max(capacity, 0) if cache_tokens is None else cache_tokens,
        block_tokens=block_tokens,
        max_num_batched_tokens=chunk,
        max_num_seqs=spec.max_num_seqs,
        time_scale=time_scale,
        adapter_load_s=adapters.load_s if adapters is not None else 0.0,
        lora_step_s=adapters.decode_step_overhead_s if adapters is not None else 0.0,
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


class CacheEvents(Protocol):
    """Who hears what the cache stores and drops, as vLLM's KV-cache events tell it."""

    def stored(
        self, block_hashes: Sequence[int], parent: int | None, tokens: Sequence[str]
    ) -> None: ...

    def removed(self, block_hashes: Sequence[int]) -> None: ...

    def cleared(self) -> None: ...


class PrefixCache:
    """Token blocks keyed by a hash chained over the prefix, evicted least recently used."""

    def __init__(self, capacity_tokens: int, block_tokens: int = DEFAULT_BLOCK_TOKENS) -> None:
        self.block_tokens = block_tokens
        self.capacity_blocks = capacity_tokens // block_tokens
        self._blocks: OrderedDict[int, None] = OrderedDict()
        self.listeners: list[CacheEvents] = []

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
        for index, block in enumerate(hashes):
            if block in self._blocks:
                self._blocks.move_to_end(block)
            else:
                self._blocks[block] = None
                start = index * self.block_tokens
                for listener in self.listeners:
                    listener.stored(
                        [block],
                        hashes[index - 1] if index else None,
                        tokens[start : start + self.block_tokens],
                    )
        while len(self._blocks) > self.capacity_blocks:
            evicted, _ = self._blocks.popitem(last=False)
            for listener in self.listeners:
                listener.removed([evicted])
        return hit * self.block_tokens

    def clear(self) -> None:
        self._blocks.clear()
        for listener in self.listeners:
            listener.cleared()

    def request_tokens(self, request: Any) -> list[str]:
        """An OpenAI chat or completion request's prompt as this simulation tokenizes it: what
        a replica's cache report names (`serving.router.cache_server`)."""
        messages = getattr(request, "messages", None)
        if messages is not None:
            return tokenize(chat_prompt(messages))
        prompt = getattr(request, "prompt", "")
        text = prompt[0] if isinstance(prompt, list) and prompt else prompt
        return tokenize(text) if isinstance(text, str) else []


class _Sequence:
    """One request inside the step loop: prompt tokens still to prefill, tokens to emit, and the
    LoRA adapter it runs under (None: the base model)."""

    def __init__(self, prefill_tokens: int, max_tokens: int, adapter: str | None = None) -> None:
        self.adapter = adapter
        self.queued_s = time.monotonic()
        self.prefill_left = prefill_tokens
        self.output_left = max_tokens
        self.emitted: asyncio.Queue[int] = asyncio.Queue()
        self.produced = 0
        self.cancelled = False

    def emit(self) -> None:
        self.emitted.put_nowait(self.produced)
        self.produced += 1
        self.output_left -= 1


class StepLoop:
    """A replica's engine steps: continuous batching with chunked prefill, as vLLM V1 schedules.

    Requests wait in arrival order; up to `max_num_seqs` are scheduled at once, and with
    `adapters` a waiting request whose adapter would make more than `max_loras` in the batch
    waits on while later ones go ahead. Every step first makes its adapters ready, then gives
    each decoding sequence its one token and fills the rest of the token budget with prompt
    chunks, oldest request first. The loop runs while there is work and sleeps otherwise.
    """

    def __init__(self, settings: SimulationSettings, adapters: AdapterCache | None = None) -> None:
        self.settings = settings
        self.adapters = adapters
        self._waiting: list[_Sequence] = []
        self._scheduled: list[_Sequence] = []
        self._task: asyncio.Task[None] | None = None
        # Told how long each sequence waited before it was scheduled (vLLM's queue time).
        self.on_scheduled: Callable[[float], None] | None = None
        self.steps = 0
        self.simulated_s = 0.0

    @property
    def running(self) -> int:
        return len(self._scheduled)

    def queue_lengths(self) -> tuple[int, int]:
        """(running, waiting) sequences now, finished and cancelled ones left out."""
        running = sum(1 for s in self._scheduled if s.output_left and not s.cancelled)
        return running, sum(1 for s in self._waiting if not s.cancelled)

    async def generate(
        self, uncached_tokens: int, max_tokens: int, adapter: str | None = None
    ) -> AsyncIterator[int]:
        """Yields 0, 1, ... as each output token is produced. At least one prompt token is
        always computed (vLLM recomputes the last one of a fully cached prompt)."""
        if adapter is not None and self.adapters is None:
            raise ValueError(f"adapter {adapter!r} asked of a replica that serves no adapters")
        sequence = _Sequence(max(uncached_tokens, 1), max_tokens, adapter)
        self._waiting.append(sequence)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())
        try:
            for _ in range(max_tokens):
                yield await sequence.emitted.get()
        finally:
            sequence.cancelled = True

    async def _run(self) -> None:
        settings = self.settings
        while True:
            self._scheduled = [s for s in self._scheduled if not s.cancelled and s.output_left]
            self._waiting = [s for s in self._waiting if not s.cancelled]
            self._admit_waiting()
            if not self._scheduled:
                return
            decoding = [s for s in self._scheduled if not s.prefill_left]
            budget = settings.max_num_batched_tokens - len(decoding)
            chunks: list[tuple[_Sequence, int]] = []
            for sequence in self._scheduled:
                if sequence.prefill_left and budget > 0:
                    chunk = min(sequence.prefill_left, budget)
                    chunks.append((sequence, chunk))
                    budget -= chunk
            loads = 0
            if self.adapters is not None:
                loads = self.adapters.apply(s.adapter for s in self._scheduled if s.adapter)
            prefill = sum(c for _, c in chunks)
            duration = settings.step(len(decoding), prefill, loads, self.adapters is not None)
            await asyncio.sleep(duration)
            self.steps += 1
            self.simulated_s += duration
            for sequence in decoding:
                sequence.emit()
            for sequence, chunk in chunks:
                sequence.prefill_left -= chunk
                if not sequence.prefill_left:
                    sequence.emit()

    def _admit_waiting(self) -> None:
        """Waiting sequences into the batch, oldest first, while it has room; one whose adapter
        would be one more than `max_loras` in the batch stays waiting (vLLM skips it)."""
        running = {s.adapter for s in self._scheduled if s.adapter}
        waiting = []
        for sequence in self._waiting:
            full = len(self._scheduled) >= self.settings.max_num_seqs
            new_adapter = sequence.adapter is not None and sequence.adapter not in running
            if full or (
                new_adapter
                and self.adapters is not None
                and len(running) >= self.adapters.gpu_slots
            ):
                waiting.append(sequence)
                continue
            self._scheduled.append(sequence)
            if sequence.adapter is not None:
                running.add(sequence.adapter)
            if self.on_scheduled is not None:
                self.on_scheduled(time.monotonic() - sequence.queued_s)
        self._waiting = waiting
