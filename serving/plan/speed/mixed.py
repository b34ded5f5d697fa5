"""A saturated server's engine step, as vLLM's scheduler builds it: the running batch's decode
tokens and, in the same step, the prompts that replace finished sequences; and the prompts it
computes twice when its KV cache runs out.

vLLM has no prefill phase and no decode phase (vllm/v1/core/sched/scheduler.py,
Scheduler.schedule, vLLM 0.22): each step has a budget of max_num_batched_tokens, spent first on
the running requests (one token each when decoding), then on waiting requests' prompt chunks,
while budget remains and fewer than max_num_seqs run. With requests queued, a sequence finishes
every output_tokens / batch steps on average and its replacement's prompt is computed in the
steps that follow, alongside every running sequence's next token: each step is mixed, and the
inter-token latency a client sees at saturation is that of the mixed step, not of a decode step.
"""

from __future__ import annotations

from serving.catalog import MachineType
from serving.plan.collectives import comm_s
from serving.plan.speed.decode import decode_step_s
from serving.plan.speed.prefill import computed_prompt, prefill_compute_s
from serving.spec.parts import Parallelism
from serving.spec.profile import ModelSpec


def recomputed_prompt_tokens(
    spec: ModelSpec, kv_capacity_tokens: int, sequences: int | None = None
) -> float:
    """Prompt tokens a saturated server computes a second time per request, because it admitted
    more prompts than its KV cache can grow. vLLM admits a waiting request when the blocks of
    its prompt are free (KVCacheManager.allocate_slots, full_sequence_must_fit: the input, not
    the output to come), and when a running sequence's next token finds no free block it
    preempts the request admitted last, frees its blocks and later computes it again from the
    start (Scheduler._preempt_request sets num_computed_tokens to 0). A finished request frees
    input + output tokens; greedy admission refills them with (input + output) / input prompts,
    of which the running sequences' growth before the next finish (output tokens, on average)
    evicts output / input: output tokens of prompt recomputed per request. None of it happens
    where max_num_seqs sequences fit at their full length, and all of it where not even
    max_num_seqs prompts fit; in between, the share of the output that does not fit. With
    fewer `sequences` to admit (a closed loop of fewer clients), those stand for max_num_seqs."""
    work = spec.workload
    seqs = spec.max_num_seqs if sequences is None else min(sequences, spec.max_num_seqs)
    full = seqs * (work.input_tokens + work.output_tokens)
    if full <= kv_capacity_tokens:
        return 0.0
    overflow = (full - kv_capacity_tokens) / (seqs * work.output_tokens)
    return work.output_tokens * min(1.0, overflow)


def preempted_waiting(spec: ModelSpec, recomputed: float) -> float:
    """Requests a full KV cache keeps waiting after their first token, on average, when each is
    computed again for `recomputed` tokens (recomputed_prompt_tokens). vLLM puts a preempted
    request back at the head of the waiting queue (Scheduler._preempt_request,
    `waiting.prepend_request`), and resumes it only once blocks for its whole sequence, prompt
    and the tokens generated so far, are free (KVCacheManager.allocate_slots with
    full_sequence_must_fit, scheduler_reserve_full_isl on by default), with nothing admitted in
    a step that preempted (vllm/v1/core/sched/scheduler.py, vLLM 0.22). Until then its client
    gets no token, and the wait counts in its time per output token.

    Little's law: those waiting are the rate of preemptions times the wait of one. With
    `batch` sequences of O output tokens running, one finishes every O / batch steps and frees
    its prompt P and its O output tokens; the batch's growth takes O back before the next
    finish, which leaves P: room for one new prompt a finish. A request preempted after g
    tokens needs P + g, and the requests behind it wait with it (the queue's head blocks), so
    room for it builds up at P a finish: it waits (P + g) / P finishes, (P + g) O / (P batch)
    steps. Preemptions come n times a request, batch / O requests a step. Their product, n (P +
    g) / P, is the tokens a request computes again, n (P + g) = `recomputed`, over P: the batch
    drops out. It counts the preempted as if each waited alone: a step-by-step replay of the
    scheduler's rules (tests/scheduler_replay.py) holds 1.5 to 2.3 times as many where outputs
    spread like chat answers, several queueing behind each other, and 7 to 20 times where every
    request has the same length (a synthetic benchmark's fixed outputs) and they finish in
    waves."""
    if recomputed <= 0:
        return 0.0
    return recomputed / spec.workload.input_tokens


def mixed_step_s(
    spec: ModelSpec,
    machine: MachineType,
    layout: Parallelism,
    batch: float,
    prompt_tokens: float,
    context: int,
) -> float:
    """One step that decodes `batch` sequences of `context` tokens and computes `prompt_tokens`
    tokens of prompts of the workload's length: the decode step of the batch, plus the prompt
    tokens' share of a whole prompt's prefill math (attention over the prompt's earlier tokens
    included) and their collectives.

    The two add up rather than overlap: one forward pass carries both, but its GEMMs then run at
    a few hundred rows, near the ridge where neither the weight stream nor the math reaches its
    bound. Qwen3-32B on one H100 (GPUStack, vLLM 0.11, random 4,000 in / 200 out, a fit run)
    decodes about 6 sequences and computes about 126 prompt tokens a step: its median
    inter-token latency, 43 ms, is well above the decode step alone (32 ms as planned), and its
    mean, 67 ms, above the two added (52 ms)."""
    decode = decode_step_s(spec, machine, layout, max(1, round(batch)), context)
    if prompt_tokens <= 0:
        return decode
    prompt, cached = computed_prompt(spec)
    tokens = batch + prompt_tokens
    prompt_s = prompt_tokens / prompt * prefill_compute_s(spec, layout, prompt, tokens, cached)
    comm = comm_s(spec, machine, layout, round(tokens)) - comm_s(
        spec, machine, layout, round(batch)
    )
    return decode + prompt_s + comm


def replacement_prompt_tokens(spec: ModelSpec, batch: float, recomputed: float = 0.0) -> float:
    """Prompt tokens a step carries on average while `batch` sequences decode and each finished
    one is replaced at once (a closed loop of clients, or a queue): a sequence finishes every
    output_tokens / batch steps, and its replacement's prompt (and the `recomputed` tokens a
    full KV cache makes it compute again) is computed in the steps after, batch x (input +
    recomputed) / output tokens a step, never more than the budget the batch leaves."""
    work = spec.workload
    wanted = batch * (computed_prompt(spec)[0] + recomputed) / work.output_tokens
    return min(wanted, max(0.0, spec.max_num_batched_tokens - batch))


def loaded_step_s(
    spec: ModelSpec,
    machine: MachineType,
    layout: Parallelism,
    batch: float,
    context: int,
    recomputed: float = 0.0,
) -> float:
    """The inter-token latency of `batch` sequences whose finished ones are replaced as they
    finish: the mixed step with the replacements' prompts (replacement_prompt_tokens). This is
    what keeps a latency rising with concurrency once more clients only queue for the KV
    cache: each step carries more of their prompts, and computes again those a full KV cache
    evicted (`recomputed` tokens per request, recomputed_prompt_tokens)."""
    prompts = replacement_prompt_tokens(spec, batch, recomputed)
    return mixed_step_s(spec, machine, layout, batch, prompts, context)


def queued_phase_s(
    spec: ModelSpec,
    machine: MachineType,
    layout: Parallelism,
    batch: int,
    queued_requests: float,
    recomputed_tokens: float,
) -> tuple[float, float]:
    """The part of a burst while requests still queue on one DP rank: `queued_requests` prompts
    (and the `recomputed_tokens` each is computed again, recomputed_prompt_tokens) join a batch
    of `batch` decoding sequences as these finish, each step carrying as many prompt tokens as
    finishing sequences free room for, within the token budget the running batch leaves. Where
    the budget cannot keep up, the steps are as many as the prompts need, each full of prompt
    tokens, and the batch decodes fewer sequences than it holds. Returns the phase's seconds and
    its step (the inter-token latency at saturation)."""
    work = spec.workload
    if queued_requests <= 0:
        return 0.0, 0.0
    prompt_tokens = queued_requests * (computed_prompt(spec)[0] + recomputed_tokens)
    decode_tokens = queued_requests * work.output_tokens
    budget_left = max(1, spec.max_num_batched_tokens - batch)
    steps = max(decode_tokens / batch, prompt_tokens / budget_left)
    context = work.decode_context_tokens
    step = mixed_step_s(
        spec, machine, layout, decode_tokens / steps, prompt_tokens / steps, context
    )
    return steps * step, step
