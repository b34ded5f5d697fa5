"""A step-by-step replay of how vLLM 0.22's scheduler admits, grows and preempts requests in a
closed loop of clients (vllm/v1/core/sched/scheduler.py, Scheduler.schedule;
vllm/v1/core/kv_cache_manager.py, allocate_slots): an independent model the planner's closed
forms (serving.plan.speed.mixed) are checked against. It counts tokens and steps, not seconds.

The rules it keeps, each from that source:
- KV cache in blocks of 16 tokens; a request holds blocks for the tokens computed so far.
- Each step spends a token budget, first on the running requests in admission order (one token
  each when decoding, the rest of a prompt otherwise); where a running request's next block is
  not free, the last request admitted is preempted: its blocks freed, its computed tokens reset
  to 0, and it goes back to the head of the waiting queue (`waiting.prepend_request`), keeping
  the tokens it generated.
- In a step that preempted nothing, waiting requests are admitted in queue order while the
  budget lasts and fewer than max_num_seqs run, each only if blocks for its whole sequence
  (prompt and tokens generated so far) are free (`full_sequence_must_fit`); the first that does
  not fit stops admission.
- A request whose computed tokens reach its prompt plus generated tokens samples one token;
  after its last, its client sends the next request to the tail of the queue.
"""

from __future__ import annotations

import math
import random
from collections import deque
from dataclasses import dataclass

BLOCK_TOKENS = 16


@dataclass
class _Request:
    output: int
    generated: int = 0
    computed: int = 0
    blocks: int = 0
    first_token: bool = False


@dataclass(frozen=True)
class Replayed:
    """Averages over the steps of a replay."""

    running: float  # requests decoding a token in a step
    waiting_after_first_token: float  # preempted requests queued after their first token
    recomputed_per_request: float  # tokens computed again, per finished request


def replay(
    clients: int,
    prompt: int,
    output: int,
    kv_tokens: int,
    budget: int = 8192,
    max_num_seqs: int = 1024,
    requests: int = 300,
    spread: bool = False,
    seed: int = 0,
) -> Replayed:
    """`requests` requests of `prompt` tokens and `output` output tokens (spread exponentially
    around it with `spread`) from `clients` clients against `kv_tokens` tokens of KV cache."""
    draw = random.Random(seed)
    free = kv_tokens // BLOCK_TOKENS
    running: list[_Request] = []
    waiting: deque[_Request] = deque()
    sent = finished = steps = 0
    recomputed = decoding = waiting_after_first = 0

    def new() -> _Request:
        nonlocal sent
        sent += 1
        length = max(1, round(draw.expovariate(1 / output))) if spread else output
        return _Request(output=length)

    waiting.extend(new() for _ in range(clients))
    while finished < requests:
        budget_left, preempted = budget, False
        scheduled: list[tuple[_Request, int]] = []
        index = 0
        while index < len(running) and budget_left > 0:
            request = running[index]
            tokens = min(prompt + request.generated - request.computed, budget_left)
            needed = math.ceil((request.computed + tokens) / BLOCK_TOKENS) - request.blocks
            while needed > free:
                victim = running.pop()
                free += victim.blocks
                recomputed += victim.computed
                victim.blocks = victim.computed = 0
                waiting.appendleft(victim)
                preempted = True
                scheduled = [(r, t) for r, t in scheduled if r is not victim]
                if victim is request:
                    break
            if needed > free:  # it preempted itself: nothing after it is scheduled
                break
            free -= needed
            request.blocks += needed
            scheduled.append((request, tokens))
            budget_left -= tokens
            index += 1
        while not preempted and waiting and budget_left > 0 and len(running) < max_num_seqs:
            request = waiting[0]
            if math.ceil((prompt + request.generated) / BLOCK_TOKENS) > free:
                break
            waiting.popleft()
            tokens = min(prompt + request.generated, budget_left)
            request.blocks = math.ceil(tokens / BLOCK_TOKENS)
            free -= request.blocks
            running.append(request)
            scheduled.append((request, tokens))
            budget_left -= tokens
        # Averages over the steady state: after the first wave of requests has finished, while
        # every client still has a request to send (not the start, not the final drain).
        steady = clients <= finished and sent < requests
        steps += steady
        done = []
        for request, tokens in scheduled:
            request.computed += tokens
            if request.computed == prompt + request.generated:
                request.generated += 1
                request.first_token = True
                decoding += steady
                if request.generated >= request.output:
                    done.append(request)
        for request in done:
            running.remove(request)
            free += request.blocks
            finished += 1
            if sent < requests:
                waiting.append(new())
        if steady:
            waiting_after_first += sum(1 for r in waiting if r.first_token)
    return Replayed(
        running=decoding / steps,
        waiting_after_first_token=waiting_after_first / steps,
        recomputed_per_request=recomputed / finished,
    )
