"""The terms of a saturated server's step (serving.plan.speed.mixed): the prompts a full KV
cache makes it compute twice, the prompts replacing finished sequences that share the decode
steps, and the queued phase of a burst. Each case is worked by hand in its docstring."""

from __future__ import annotations

import pytest
from planner_support import spec
from scheduler_replay import replay

from serving.plan.placement import choose_machine
from serving.plan.speed import decode_step_s, prefill_compute_s
from serving.plan.speed.mixed import (
    mixed_step_s,
    preempted_waiting,
    queued_phase_s,
    recomputed_prompt_tokens,
    replacement_prompt_tokens,
)


def test_greedy_admission_recomputes_the_output_that_does_not_fit() -> None:
    """1,000-token prompts, 200-token outputs, 100 sequences at most: at full length they need
    100 x 1,200 = 120,000 tokens. With 130,000 nothing is preempted; with 110,000 the 10,000
    that do not fit are half of the 100 x 200 output tokens, so half of each request's 200
    output tokens' worth of prompt is computed again (100); with 50,000 not even the prompts
    fit, and all 200 are."""
    model = spec(workload={"input_tokens": 1000, "output_tokens": 200}, max_num_seqs=100)
    assert recomputed_prompt_tokens(model, 130_000) == 0.0
    assert recomputed_prompt_tokens(model, 110_000) == pytest.approx(100.0)
    assert recomputed_prompt_tokens(model, 50_000) == pytest.approx(200.0)


def test_fewer_clients_than_max_num_seqs_overcommit_only_by_themselves() -> None:
    """A closed loop of 50 clients admits at most 50 prompts: at full length they need 50 x
    1,200 = 60,000 tokens, within 110,000, so nothing is computed twice; 100 clients against
    110,000 tokens recompute 100, as above; 500 clients count as max_num_seqs' 100."""
    model = spec(workload={"input_tokens": 1000, "output_tokens": 200}, max_num_seqs=100)
    assert recomputed_prompt_tokens(model, 110_000, sequences=50) == 0.0
    assert recomputed_prompt_tokens(model, 110_000, sequences=100) == pytest.approx(100.0)
    assert recomputed_prompt_tokens(model, 110_000, sequences=500) == pytest.approx(100.0)


def test_the_preempted_wait_as_many_as_their_recomputed_tokens_are_prompts() -> None:
    """Each of a batch's finishes leaves room for one 1,000-token prompt; a request preempted
    after 500 tokens waits 1.5 finishes for its 1,500. Preempted once in two requests, it
    recomputes 750 tokens a request, and 750 / 1,000 = 0.75 requests wait on average: one
    preemption every 2 requests (every 2 x 200 / 64 steps for 64 sequences of 200 tokens)
    times 1.5 x 200 / 64 steps. Nothing recomputed, nothing waits."""
    model = spec(workload={"input_tokens": 1000, "output_tokens": 200})
    finishes_per_step = 64 / 200
    preemptions_per_step = finishes_per_step / 2
    wait_steps = 1500 / 1000 / finishes_per_step
    assert preemptions_per_step * wait_steps == pytest.approx(0.75)
    assert preempted_waiting(model, 750.0) == pytest.approx(0.75)
    assert preempted_waiting(model, 0.0) == 0.0


# (clients, prompt, output, KV cache tokens): sequences that outgrow the cache by 9% to 92%.
OUTGROWN = [(100, 1000, 200, 110_000), (128, 1000, 1000, 150_000), (64, 1000, 2000, 100_000)]


@pytest.mark.parametrize(("clients", "prompt", "output", "cache_tokens"), OUTGROWN)
def test_recomputed_tokens_match_a_replay_of_vllms_scheduler(
    clients: int, prompt: int, output: int, cache_tokens: int
) -> None:
    """A step-by-step replay of vLLM 0.22's admission and preemption rules (scheduler_replay)
    recomputes what the closed form says, within 10%, where all requests have the workload's
    lengths; and holds at least as many preempted requests waiting after their first token as
    preempted_waiting counts. (It holds more: 1.5 to 2.3 times as many where outputs spread like
    chat answers, and 7 to 20 times where they are all of one length and finish in waves.)"""
    model = spec(workload={"input_tokens": prompt, "output_tokens": output}, max_num_seqs=1024)
    recomputed = recomputed_prompt_tokens(model, cache_tokens, clients)
    replayed = replay(clients, prompt, output, cache_tokens, requests=600)
    assert replayed.recomputed_per_request == pytest.approx(recomputed, rel=0.1)
    assert replayed.waiting_after_first_token >= preempted_waiting(model, recomputed)
    chat = replay(clients, prompt, output, cache_tokens, requests=600, spread=True)
    assert chat.waiting_after_first_token >= preempted_waiting(model, recomputed)


def test_replacements_bring_their_prompts_and_what_is_computed_again() -> None:
    """64 sequences of 200 output tokens, prompts of 1,000: one finishes every 200 / 64 steps,
    so 64 x 1,000 / 200 = 320 prompt tokens a step, and 64 x (1,000 + 100) / 200 = 352 with
    100 tokens computed again per request; with 2,048 sequences the budget of 8,192 leaves
    6,144."""
    model = spec(workload={"input_tokens": 1000, "output_tokens": 200}, max_num_seqs=4096,
                 max_num_batched_tokens=8192)  # fmt: skip
    assert replacement_prompt_tokens(model, 64) == pytest.approx(320.0)
    assert replacement_prompt_tokens(model, 64, recomputed=100.0) == pytest.approx(352.0)
    assert replacement_prompt_tokens(model, 2048) == pytest.approx(6144.0)


def test_queued_prompts_ride_in_the_steps_that_decode_the_batch() -> None:
    """50 queued requests of 1,000 prompt and 100 output tokens join a batch of 100: their
    5,000 output tokens take 50 steps of the batch, their 50,000 prompt tokens 50,000 / (2,048
    - 100) = 25.7 steps of the budget the batch leaves, so 50 steps of 100 decode and 1,000
    prompt tokens each."""
    model = spec(workload={"input_tokens": 1000, "output_tokens": 100}, max_num_seqs=256,
                 max_num_batched_tokens=2048)  # fmt: skip
    layout = model.parallelism
    machine = choose_machine(model, layout.gpus_per_replica)
    seconds, step = queued_phase_s(model, machine, layout, 100, 50, 0.0)
    assert step == pytest.approx(mixed_step_s(model, machine, layout, 100, 1000, 1050))
    assert seconds == pytest.approx(50 * step)


def test_a_budget_that_cannot_keep_up_stretches_the_steps_and_thins_the_batch() -> None:
    """With 4,000-token prompts the 50 requests bring 200,000 prompt tokens: 200,000 / 1,948 =
    102.7 steps, more than the 50 their outputs need, so each step carries 1,948 prompt tokens
    and 5,000 / 102.7 = 48.7 decode tokens."""
    model = spec(workload={"input_tokens": 4000, "output_tokens": 100}, max_num_seqs=256,
                 max_num_batched_tokens=2048)  # fmt: skip
    layout = model.parallelism
    machine = choose_machine(model, layout.gpus_per_replica)
    seconds, step = queued_phase_s(model, machine, layout, 100, 50, 0.0)
    steps = 200_000 / 1948
    assert step == pytest.approx(mixed_step_s(model, machine, layout, 5000 / steps, 1948, 4050))
    assert seconds == pytest.approx(steps * step)


def test_a_mixed_step_adds_the_prompts_math_to_the_batchs_decode_step() -> None:
    """On one GPU (no collectives) a step that decodes 64 sequences and computes a whole
    1,000-token prompt costs the 64-sequence decode step plus that prompt's prefill math, in a
    step of 1,064 tokens: the two add, they do not overlap. Without prompt tokens it is the
    decode step; half a prompt costs half of its math."""
    model = spec(workload={"input_tokens": 1000, "output_tokens": 200},
                 max_num_seqs=256, max_num_batched_tokens=2048)  # fmt: skip
    layout = model.parallelism
    machine = choose_machine(model, layout.gpus_per_replica)
    decode = decode_step_s(model, machine, layout, 64, 1100)
    whole = prefill_compute_s(model, layout, 1000, 1064)
    assert mixed_step_s(model, machine, layout, 64, 0, 1100) == pytest.approx(decode)
    assert mixed_step_s(model, machine, layout, 64, 1000, 1100) == pytest.approx(decode + whole)
    half = prefill_compute_s(model, layout, 1000, 564) / 2
    assert mixed_step_s(model, machine, layout, 64, 500, 1100) == pytest.approx(decode + half)
