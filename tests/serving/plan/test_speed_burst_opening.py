"""A burst's opening and the drain it leaves (serving.plan.speed.burst: opening,
burst_drain, drain_phases' stagger): vLLM admits the queued prompts a token budget at a time and
decodes those admitted in the same steps, and a synthetic benchmark's outputs of one length end
as staggered as they were admitted. Each case is worked by hand in its docstring."""

from __future__ import annotations

import math

import pytest
from planner_support import spec

from serving.plan.memory import memory
from serving.plan.placement import choose_machine
from serving.plan.speed import decode_step_s
from serving.plan.speed.burst import (
    burst,
    burst_drain,
    drain_phases,
    opening,
)
from serving.plan.speed.mixed import mixed_step_s


def _fixed(output: int = 100, **fields: object) -> object:
    """2,000-token prompts, outputs all of `output` tokens (the cap), a budget of 8,192."""
    work = {"input_tokens": 2000, "output_tokens": output, "max_output_tokens": output}
    return spec(workload=work, max_num_batched_tokens=8192, **fields)


def _tokens(phases: list[tuple[float, int]]) -> float:
    return sum(steps * size for steps, size in phases)


def test_an_opening_longer_than_an_output_admits_at_the_budget_less_the_decodes() -> None:
    """400 prompts of 2,000 tokens, 800,000 in all, at 8,192 a step less the running decodes.
    Admitted evenly over F steps, a sequence admitted at t decodes min(100, F - t) tokens:
    400 / F x (100 F - 100^2 / 2) = 40,000 - 2,000,000 / F in all, and the decodes average that
    over F. F (8,192 - 40,000 / F + 2,000,000 / F^2) = 800,000 gives 8,192 F^2 - 840,000 F +
    2,000,000 = 0: F = (840,000 + 800,040) / 16,384 = 100.10 steps, 20,020 tokens decoded in
    them, 200 a step beside 7,992 prompt tokens."""
    model = _fixed()
    layout = model.parallelism
    machine = choose_machine(model, layout.gpus_per_replica)
    start = opening(model, machine, layout, 400)
    assert start.steps == pytest.approx(100.10, abs=0.01)
    assert start.decoded == pytest.approx(20_020, rel=1e-3)
    step = mixed_step_s(model, machine, layout, 200, 7992, 2050)
    assert start.seconds / start.steps == pytest.approx(step, rel=1e-3)


def test_a_short_opening_decodes_half_of_itself_per_prompt() -> None:
    """40 prompts, 80,000 tokens: F (8,192 - 20) = 80,000 gives F = 9.79 steps, shorter than an
    output, so each prompt decodes for half of them on average: 40 x 9.79 / 2 = 195.8 tokens."""
    model = _fixed()
    layout = model.parallelism
    start = opening(model, choose_machine(model, layout.gpus_per_replica), layout, 40)
    assert start.steps == pytest.approx(80_000 / 8172, rel=1e-3)
    assert start.decoded == pytest.approx(40 * start.steps / 2, rel=1e-3)


def test_outputs_of_one_length_end_as_staggered_as_they_were_admitted() -> None:
    """A batch of 80 admitted over 40 steps, outputs all of 100: the last admitted decodes 100
    steps after the opening, the batch stays whole for 100 - 40 = 60 of them and then thins
    evenly, 80 x (60 + 40 / 2) = 6,400 tokens. Without a stagger the batch ends together, after
    100 steps of 80."""
    model = _fixed()
    phases = drain_phases(model, 80, 80, stagger=40)
    assert sum(steps for steps, _ in phases) == pytest.approx(100)
    assert phases[0] == (60, 80)
    assert _tokens(phases) == pytest.approx(6400)
    assert drain_phases(model, 80, 80) == [(100.0, 80)]


@pytest.mark.parametrize("first", [40, 400])
def test_opening_and_drain_decode_every_output_token_once(first: int) -> None:
    """Whatever the opening's length against an output's, what it decodes and what the drain
    after it decodes add up to the prompts' outputs: first x 100. (400 prompts: 20,020 in the
    opening, and of the 400 x 100 / 100.10 = 399.6 admitted in its last 100 steps, half their
    outputs, 19,980, in the drain.)"""
    model = _fixed()
    layout = model.parallelism
    start = opening(model, choose_machine(model, layout.gpus_per_replica), layout, first)
    drained = _tokens(burst_drain(model, first, first, start))
    assert start.decoded + drained == pytest.approx(first * 100, rel=0.01)


def test_outputs_that_spread_run_on_as_their_exponential_leaves() -> None:
    """Exponential outputs of mean 100: a sequence admitted t steps before the opening ends is
    still running with odds e^(-t/100), so r x 100 x (1 - e^(-F/100)) run on, r = 100 / F
    prompts a step, and the rest of the 100 x 100 output tokens were decoded. The drain is that
    of the sequences left, whatever they decoded (an exponential forgets)."""
    model = spec(workload={"input_tokens": 2000, "output_tokens": 100}, max_num_batched_tokens=8192)
    layout = model.parallelism
    start = opening(model, choose_machine(model, layout.gpus_per_replica), layout, 100)
    f = start.steps
    assert start.running == pytest.approx(100 / f * 100 * (1 - math.exp(-f / 100)), rel=1e-6)
    assert start.decoded + 100 * start.running == pytest.approx(100 * 100)
    assert burst_drain(model, 100, 100, start) == drain_phases(model, 100, start.running)


def test_a_burst_handed_over_slower_than_the_budget_admits_opens_at_that_pace() -> None:
    """400 prompts of 2,000 tokens that the server hands the engine one per 100 ms: the opening
    lasts 400 x 0.1 = 40 s, far longer than the 100 steps the budget needs, so its steps carry
    fewer prompt tokens than the budget (800,000 over more than 100 steps), it outlasts an
    output of 100, and only those admitted in its last 100 steps still run at its end. Handed
    over faster than the budget admits, the opening is the budget's."""
    model = _fixed()
    layout = model.parallelism
    machine = choose_machine(model, layout.gpus_per_replica)
    paced = opening(model, machine, layout, 400, arrival_s=0.1)
    assert paced.seconds == pytest.approx(40.0, rel=1e-6)
    assert paced.steps > 100 and 800_000 / paced.steps < 8192
    assert paced.running == pytest.approx(400 * 100 / paced.steps, rel=1e-6)
    budget = opening(model, machine, layout, 400)
    assert opening(model, machine, layout, 400, arrival_s=1e-6) == budget
    assert budget.seconds < paced.seconds


def test_a_burst_that_fits_decodes_its_opening_at_a_prefill_steps_pace() -> None:
    """400 prompts of 2,000 tokens that the KV cache holds at once queue nothing, so before
    the opening their tokens all came at a decode step's pace. The opening's steps each carry
    7,992 prompt tokens: the burst's inter-token latency now sits above the decode step of the
    whole batch, and below the opening's mixed step, which its drain undercuts."""
    model = _fixed(max_num_seqs=1024, accelerator="h200-141gb")
    layout = model.parallelism
    machine = choose_machine(model, layout.gpus_per_replica)
    mem = memory(model, layout)
    assert mem.kv_capacity_tokens > 400 * 2050
    itl = burst(model, machine, layout, mem, 400, 400).itl_s
    start = opening(model, machine, layout, 400)
    decode = decode_step_s(model, machine, layout, 400, 2050)
    assert decode < itl < start.seconds / start.steps
    assert not math.isclose(itl, decode, rel_tol=0.05)
