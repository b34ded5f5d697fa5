"""A prefix the cache is expected to serve (workload.prefix_cache_hit_rate): vLLM computes only
the rest of each prompt, each token attending over the whole prompt. Worked by hand below."""

from __future__ import annotations

import pytest
from planner_support import spec

from serving.plan.placement import choose_machine
from serving.plan.speed import prefill_compute_s, ttft_s
from serving.plan.speed.mixed import replacement_prompt_tokens
from serving.plan.speed.prefill import cached_prefix_tokens, computed_prompt


def test_the_cache_serves_its_share_but_never_the_whole_prompt() -> None:
    """0.75 of 1,000 tokens is 750 served, 250 computed; of a 1-token prompt none is served
    (vLLM computes a prompt's last token whatever the cache holds); no rate, nothing served."""
    model = spec(workload={"input_tokens": 1000, "prefix_cache_hit_rate": 0.75})
    assert computed_prompt(model) == (250, 750)
    assert cached_prefix_tokens(model, 1) == 0
    assert computed_prompt(spec(workload={"input_tokens": 1000})) == (1000, 0)


def test_computing_a_suffix_costs_the_whole_prompt_less_its_prefix() -> None:
    """Causal attention over a prompt of T tokens costs in proportion to T² / 2 pairs, the
    weights in proportion to T: the 250 tokens after a cached 750 cost what 1,000 tokens cost
    less what the first 750 cost (at one step size, so the weights' efficiency is the same),
    the first 750 taken as a chunk that samples nothing (the whole prompt and its suffix each
    sample one LM-head row)."""
    model = spec(workload={"input_tokens": 1000})
    layout = model.parallelism
    step = 2048.0
    suffix = prefill_compute_s(model, layout, 250, step, cached=750)
    whole = prefill_compute_s(model, layout, 1000, step)
    prefix = prefill_compute_s(model, layout, 750, step, sampled=0)
    assert suffix == pytest.approx(whole - prefix)
    assert suffix > prefill_compute_s(model, layout, 250, step)  # it attends to the prefix


def test_an_expected_hit_rate_shortens_ttft_and_the_prompts_steps_carry() -> None:
    """Replacements bring only what the cache does not serve: 64 sequences of 200 output
    tokens, prompts of 1,000 with 0.5 cached, carry 64 x 500 / 200 = 160 prompt tokens a step
    (320 without the cache); and the first token comes sooner."""
    cold = spec(workload={"input_tokens": 1000, "output_tokens": 200}, max_num_seqs=4096,
                max_num_batched_tokens=8192)  # fmt: skip
    warm = spec(workload={"input_tokens": 1000, "output_tokens": 200,
                          "prefix_cache_hit_rate": 0.5},
                max_num_seqs=4096, max_num_batched_tokens=8192)  # fmt: skip
    assert replacement_prompt_tokens(cold, 64) == pytest.approx(320.0)
    assert replacement_prompt_tokens(warm, 64) == pytest.approx(160.0)
    layout = cold.parallelism
    machine = choose_machine(cold, layout.gpus_per_replica)
    assert ttft_s(warm, machine, layout) < ttft_s(cold, machine, layout)
