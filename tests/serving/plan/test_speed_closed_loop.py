"""A closed loop of clients on one replica (serving.plan.speed.saturation.closed_loop): the batch
its KV cache holds runs, the preempted wait after their first token, and the clients beyond those
in flight queue for theirs. Each case is worked by hand in its docstring."""

from __future__ import annotations

import pytest
from planner_support import spec

from serving.catalog import MachineType
from serving.plan.memory import memory
from serving.plan.placement import choose_machine
from serving.plan.speed import Estimates, ttft_s
from serving.plan.speed.mixed import loaded_step_s
from serving.plan.speed.saturation import closed_loop
from serving.spec.parts import Parallelism
from serving.spec.profile import ModelSpec

# 1,000-token prompts and 200-token outputs, at most 100 sequences: 120,000 tokens at full
# length, 110,000 (an average length of 1,100) at the cache's limit.
PROMPT, OUTPUT = 1000, 200
CACHE_TOKENS = 110_000
SATURATED = CACHE_TOKENS // (PROMPT + OUTPUT // 2)


def _loop(clients: int) -> tuple[ModelSpec, MachineType, Parallelism, Estimates]:
    model = spec(workload={"input_tokens": PROMPT, "output_tokens": OUTPUT}, max_num_seqs=100)
    layout = model.parallelism
    machine = choose_machine(model, layout.gpus_per_replica)
    mem = memory(model, layout).model_copy(update={"kv_capacity_tokens": CACHE_TOKENS})
    looped = closed_loop(model, machine, "server", layout, mem, SATURATED, clients, 0.0, 0.0)
    return model, machine, layout, looped


def test_clients_within_the_cache_neither_wait_nor_queue() -> None:
    """50 clients need 50 x 1,200 = 60,000 tokens at full length: nothing is preempted, each
    token comes a loaded step apart, and a first token waits only for the 49 others' step."""
    model, machine, layout, looped = _loop(50)
    step = loaded_step_s(model, machine, layout, 50, 1100, 0.0)
    assert looped.itl_s == pytest.approx(step)
    assert looped.ttft_s == pytest.approx(ttft_s(model, machine, layout, running=49))
    assert looped.decode_batch == 50


def test_the_preempted_stretch_the_time_per_token_of_those_in_flight() -> None:
    """100 clients need 120,000 tokens against 110,000: each request recomputes 100 tokens
    (recomputed_prompt_tokens), so 100 / 1,000 = 0.1 of them wait preempted, 99.9 run, and a
    client's tokens come 100 / 99.9 loaded steps apart. All 100 are in flight: none queues."""
    model, machine, layout, looped = _loop(100)
    step = loaded_step_s(model, machine, layout, 100, 1100, 100.0)
    assert looped.itl_s == pytest.approx(step * 100 / 99.9)
    assert looped.ttft_s == pytest.approx(ttft_s(model, machine, layout, running=99))


def test_clients_beyond_the_cache_queue_for_their_first_token() -> None:
    """200 clients against a cache that holds 100 running: 100 run, 0.1 wait preempted (as
    with 100: admission overcommits by max_num_seqs' 100 prompts), 99.9 queue. The 100.1 in
    flight answer 100.1 / cycle requests a second, so a queued client's first token comes
    99.9 / 100.1 cycles later, a cycle being the first token plus 199 tokens' time."""
    model, machine, layout, looped = _loop(200)
    step = loaded_step_s(model, machine, layout, 100, 1100, 100.0)
    per_token = step * 100.1 / 100
    first = ttft_s(model, machine, layout, running=99)
    cycle = first + 199 * per_token
    assert looped.itl_s == pytest.approx(per_token)
    assert looped.ttft_s == pytest.approx(first + 99.9 / 100.1 * cycle)
    assert looped.requests_per_s == pytest.approx(100.1 / cycle)
    # Little's law over the whole loop: 200 clients, one answer each per first token and decode.
    assert 200 / looped.requests_per_s == pytest.approx(looped.ttft_s + 199 * looped.itl_s)
    assert looped.decode_batch == SATURATED
