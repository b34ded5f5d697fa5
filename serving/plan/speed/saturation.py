"""A replica's estimates: latency at low load, and the throughput of a burst of requests
queued at once. A saturated server decodes as many sequences as its KV cache holds at their
average length, not at their longest, and drains as its requests finish."""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

from pydantic import Field

from serving.catalog import MachineType
from serving.frozen import Frozen
from serving.plan.collectives import P2P_LATENCY_S
from serving.plan.memory import MemoryBreakdown, kv_bytes_per_token
from serving.plan.speed.decode import decode_step_s
from serving.plan.speed.mixed import (
    loaded_step_s,
    mixed_step_s,
    preempted_waiting,
    queued_phase_s,
    recomputed_prompt_tokens,
)
from serving.plan.speed.prefill import computed_prompt, prefill_compute_s, prefill_s, ttft_s
from serving.spec.parts import Parallelism
from serving.spec.profile import ModelSpec

# Throughput is that of this many requests queued at once: `vllm bench serve`'s default
# --num-prompts, the way published serving throughput is measured.
BURST_REQUESTS = 1000
DRAIN_POINTS = 24
STAGGER_PHASES = 4


class Estimates(Frozen):
    """Estimates for one replica (see serving.plan.speed)."""

    prefill_s: float = Field(description="Prefill of the workload's input at batch 1.")
    ttft_s: float = Field(description="Time to first token at low load (or at the concurrency).")
    itl_s: float = Field(description="Inter-token latency at batch 1 (or at the concurrency).")
    decode_batch: int = Field(description="Sequences decoded per step at the throughput point.")
    itl_at_batch_s: float = Field(description="Inter-token latency at that batch.")
    requests_per_s: float
    output_tokens_per_s: float


def _kv_transfer_s(spec: ModelSpec, machine: MachineType) -> float:
    """P/D: the prefill side ships the prompt's KV cache to the decode side over the network."""
    size = spec.workload.input_tokens * kv_bytes_per_token(spec)
    return P2P_LATENCY_S + size / machine.network_bandwidth_bytes_per_s


def saturated_batch(spec: ModelSpec, layout: Parallelism, mem: MemoryBreakdown) -> int:
    """Sequences one DP rank decodes at once when requests queue: what its KV cache holds with
    each sequence at its average length over its life (prompt plus half its output, since vLLM
    allocates blocks as tokens arrive), capped by max_num_seqs."""
    work = spec.workload
    per_rank_tokens = mem.kv_capacity_tokens // layout.data
    average_length = work.input_tokens + work.output_tokens // 2
    return min(spec.max_num_seqs, per_rank_tokens // average_length)


def burst_decode_s(
    spec: ModelSpec, machine: MachineType, layout: Parallelism, batch: int, requests: float
) -> float:
    """Decode time of `requests` requests queued at once on one DP rank that decodes at most
    `batch` at a time, with output lengths spread like chat completions (exponentially around
    the workload's mean): the batch stays full while the queue lasts, then drains as requests
    finish, and the longest ones decode almost alone. Published serving throughput is measured
    this way (`vllm bench serve` sends its prompts at once), and the drain is where a server
    falls short of its full-batch rate."""
    work = spec.workload
    context = work.input_tokens + work.output_tokens // 2
    full = decode_step_s(spec, machine, layout, batch, context)
    queued_tokens = max(0.0, requests - batch) * work.output_tokens
    return queued_tokens / batch * full + drain_s(spec, machine, layout, batch, requests)


def output_scale(spec: ModelSpec) -> float:
    """The scale of the exponential the workload's outputs spread by: the mean itself, or, where
    requests stop at a cap C (workload.max_output_tokens: vLLM ends a sequence at its
    SamplingParams.max_tokens), the scale whose exponential cut at C keeps the mean,
    mean = scale x (1 - e^(-C / scale)); infinite where the mean is the cap (every output
    reaches it)."""
    work = spec.workload
    mean, cap = work.output_tokens, work.max_output_tokens
    if cap is None:
        return float(mean)
    if mean >= cap:
        return math.inf
    # (1 - e^-x) / x falls from 1 at x = 0: solve it for x = C / scale by bisection.
    low, high = 1e-9, 1e3
    for _ in range(200):
        x = (low + high) / 2
        low, high = (x, high) if (1 - math.exp(-x)) / x > mean / cap else (low, x)
    return cap / ((low + high) / 2)


def drain_phases(
    spec: ModelSpec, batch: int, requests: float, stagger: float = 0.0
) -> list[tuple[float, int]]:
    """The steps a full batch of `batch` sequences (or all `requests`, if fewer) takes to drain
    once no request queues, as (steps, sequences decoded in each) pairs. Outputs spread
    exponentially (output_scale); under a cap the batch drains only until the cap, where the
    rest end together. Where every output is the cap (a synthetic benchmark's fixed lengths),
    the batch ends as staggered as it was admitted: the prompts of the burst's opening entered
    over `stagger` steps (Opening.steps), so the last sequence admitted decodes the cap's
    steps, and the batch stays whole for cap - stagger of them, then thins evenly to none."""
    cap = spec.workload.max_output_tokens
    scale = output_scale(spec)
    draining = min(float(batch), requests)
    if math.isinf(scale):
        assert cap is not None
        spread = min(stagger, float(cap))
        whole = [(cap - spread, max(1, round(draining)))] if spread < cap else []
        if spread <= 0:
            return whole
        # Evenly thinning: STAGGER_PHASES equal spans, each at the batch left at its middle.
        span = spread / STAGGER_PHASES
        return whole + [
            (span, max(1, round(draining * (1 - (i + 0.5) / STAGGER_PHASES))))
            for i in range(STAGGER_PHASES)
        ]
    # Draining from b sequences: b(t) = b e^(-t/scale), so the steps spent between batch sizes
    # B and B - dB are scale x dB / B. Sum that over batch sizes, log-spaced, down to one or to
    # the batch left at the cap.
    lowest = 1.0 if cap is None else max(1.0, draining * math.exp(-cap / scale))
    points = max(2, min(DRAIN_POINTS, int(draining)))
    sizes = [
        draining ** (1 - i / (points - 1)) * lowest ** (i / (points - 1)) for i in range(points)
    ]
    phases = [
        (scale * math.log(high / low), max(1, round(math.sqrt(high * low))))
        for high, low in itertools.pairwise(sizes)
    ]
    if lowest > 1.0:
        return phases
    # The longest of them outlives the last drain step by its remaining length: about one
    # scale (an exponential forgets how long it has run), cut at the cap.
    tail = scale
    if cap is not None:
        tail *= 1 - math.exp(-(cap - scale * math.log(draining)) / scale)
    return [*phases, (tail, 1)]


def drain_s(
    spec: ModelSpec,
    machine: MachineType,
    layout: Parallelism,
    batch: int,
    requests: float,
    start: Opening | None = None,
) -> float:
    """Decode time of a full batch of `batch` sequences (or all `requests`, if fewer) once no
    request queues: the batch drains as requests finish (burst_decode_s); after a server's
    `start`, what its opening left (burst_drain)."""
    work = spec.workload
    context = work.input_tokens + work.output_tokens // 2
    phases = (
        drain_phases(spec, batch, requests)
        if start is None
        else burst_drain(spec, batch, requests, start)
    )
    return sum(
        steps * decode_step_s(spec, machine, layout, size, context) for steps, size in phases
    )


class Opening(NamedTuple):
    """A burst's opening on one DP rank (`opening`)."""

    steps: float  # steps the first prompts take to be admitted
    seconds: float
    decoded: float  # output tokens the admitted sequences decode meanwhile
    running: float  # sequences still decoding at its end


def opening(
    spec: ModelSpec,
    machine: MachineType,
    layout: Parallelism,
    first: float,
    arrival_s: float = 0.0,
) -> Opening:
    """The start of a burst: vLLM does not compute the `first` prompts its KV cache holds and
    then decode them, it admits them a token budget at a time (max_num_batched_tokens a step,
    less a token for each running sequence: vllm/v1/core/sched/scheduler.py, Scheduler.schedule)
    and each decodes a token a step from the step after its last chunk. The prompts enter at an
    even rate over F = first x prompt / (budget - decoding) steps. Each of its steps is mixed:
    the budget's prompt tokens and the decodes of those admitted (mixed_step_s), so the early
    sequences' tokens come at a prefill step's pace, not a decode step's. GLM-4.6 on 8xH200
    (GPUStack, vLLM 0.11, random 2,000 in / 100 out, 500 prompts) shows it: mean TPOT 270 ms,
    where its decode step alone is about 55 ms.

    Nor can a prompt enter before the server has handed it to the engine: where the server
    does serial work per request (`arrival_s`, its API server's event loop), the burst reaches
    the engine one request per arrival_s, and the opening lasts at least first x arrival_s,
    in steps that carry fewer prompt tokens each. GPUStack's ShareGPT bursts on vLLM 0.11 show
    it: DeepSeek-R1's 1,000 requests at 22.3 ms each (its short-prompt run) are admitted over
    22.3 s, and the run's 99th-percentile time to first token is 24.4 s.

    What the opening decodes and leaves running, with r = first / F prompts a step and mean
    output O: outputs all of one length (the cap) decode min(O, F - t) tokens for a sequence
    admitted at step t, r x (F^2 / 2) in all while F <= O and r x (F O - O^2 / 2) beyond,
    and those admitted in the last O steps run on; outputs spread exponentially end at any
    step with odds 1 / O, so r O (1 - e^(-F/O)) run on and the rest of first x O was decoded."""
    work = spec.workload
    new, _ = computed_prompt(spec)
    if first <= 0 or new <= 0:
        return Opening(0.0, 0.0, 0.0, max(0.0, first))
    budget = spec.max_num_batched_tokens
    output = float(work.output_tokens)
    fixed = math.isinf(output_scale(spec))
    context = work.input_tokens + work.output_tokens // 2

    def decoded_in(steps: float) -> float:
        if fixed:
            live = min(steps, output)
            return first / steps * live * (steps - live / 2)
        return first * output * (1 - output / steps * -math.expm1(-steps / output))

    def step_of(steps: float) -> float:
        decoding = decoded_in(steps) / steps
        return mixed_step_s(spec, machine, layout, decoding, first * new / steps, context)

    steps = first * new / budget
    # The decodes take budget from the prompts, which lengthens the opening: a few rounds settle.
    for _ in range(3):
        steps = first * new / max(1.0, budget - decoded_in(steps) / steps)
    step = step_of(steps)
    if first * arrival_s > steps * step:
        # Paced by arrivals: as many steps as fit in first x arrival_s at their own length
        # (fewer prompt tokens each, so shorter); the geometric mean of each round damps it.
        for _ in range(30):
            steps = math.sqrt(steps * first * arrival_s / step_of(steps))
        step = step_of(steps)
        steps = first * arrival_s / step
    decoded = decoded_in(steps)
    running = first * min(1.0, output / steps) if fixed else first - decoded / output
    return Opening(steps, steps * step, decoded, running)


def burst_drain(
    spec: ModelSpec, batch: int, requests: float, start: Opening
) -> list[tuple[float, int]]:
    """The drain of a server's burst after its `start` (drain_phases): of the sequences the
    opening left running. Outputs all at the cap end as staggered as the opening admitted them;
    outputs spread exponentially forget what they decoded, so the drain is that of a batch of
    the sequences left."""
    running = min(float(batch), start.running)
    if math.isinf(output_scale(spec)):
        return drain_phases(spec, batch, running, start.steps)
    return drain_phases(spec, batch, running)


def served_burst_s(
    spec: ModelSpec,
    machine: MachineType,
    layout: Parallelism,
    mem: MemoryBreakdown,
    batch: int,
    requests: float,
    arrival_s: float = 0.0,
) -> float:
    """Time for one DP rank of a server to answer `requests` requests queued at once: the first
    `batch` prompts fill the batch (`opening`), the rest join it in mixed steps as sequences
    finish (each computed again as often as the KV cache forces, `recomputed_prompt_tokens`),
    then the batch drains. `arrival_s`: the server's serial work per request before the engine
    sees it (opening)."""
    first = min(float(batch), requests)
    per_rank_kv = mem.kv_capacity_tokens // layout.data
    recomputed = recomputed_prompt_tokens(spec, per_rank_kv)
    queued, _ = queued_phase_s(spec, machine, layout, batch, requests - first, recomputed)
    # The queued requests, too, reach the engine no faster than the server hands them over.
    queued = max(queued, (requests - first) * arrival_s)
    start = opening(spec, machine, layout, first, arrival_s)
    return start.seconds + queued + drain_s(spec, machine, layout, batch, requests, start)


def burst_itl_s(
    spec: ModelSpec,
    machine: MachineType,
    layout: Parallelism,
    mem: MemoryBreakdown,
    batch: int,
    requests: float,
    arrival_s: float = 0.0,
) -> float:
    """Mean inter-token latency over a burst of `requests` requests queued at once on one DP
    rank, over every token decoded: while requests queue, the mixed step of the queued phase
    (queued_phase_s), which carries the prompts replacing finished sequences; then the decode
    steps of the drain."""
    work = spec.workload
    context = work.input_tokens + work.output_tokens // 2
    first = min(float(batch), requests)
    per_rank_kv = mem.kv_capacity_tokens // layout.data
    recomputed = recomputed_prompt_tokens(spec, per_rank_kv)
    queued = requests - first
    _, step = queued_phase_s(spec, machine, layout, batch, queued, recomputed)
    start = opening(spec, machine, layout, first, arrival_s)
    # The opening's tokens come at its mixed step.
    opening_step = start.seconds / start.steps if start.steps else 0.0
    seconds = queued * work.output_tokens * step + start.decoded * opening_step
    tokens = queued * work.output_tokens + start.decoded
    for steps, size in burst_drain(spec, batch, requests, start):
        seconds += steps * size * decode_step_s(spec, machine, layout, size, context)
        tokens += steps * size
    return seconds / tokens


def estimates(
    spec: ModelSpec,
    machine: MachineType,
    role: str,
    layout: Parallelism,
    mem: MemoryBreakdown,
    itl_target_s: float | None = None,
    burst_requests: int = BURST_REQUESTS,
    concurrency: int | None = None,
    arrival_s: float = 0.0,
) -> Estimates:
    """Latency at low load, and throughput of a burst of `burst_requests` requests decoded at
    the batch a saturated server reaches (lowered to meet an inter-token latency target if one
    is given). The size of the burst matters: the fewer the requests, the larger the share of
    the run spent draining, when the batch is no longer full. With `concurrency`, the figures
    of a closed loop of that many clients on the replica instead (`closed_loop`). `arrival_s`:
    the server's serial work per request, which paces a burst's way into each DP rank's engine
    at arrival_s x data a request (opening)."""
    work = spec.workload
    # P/D: the prefill side's prompt ends once its KV cache reaches the decode side.
    transfer = _kv_transfer_s(spec, machine) if role == "prefill" else 0.0
    new, cached = computed_prompt(spec)
    prompt = prefill_s(spec, machine, layout, new, cached) + transfer
    context = work.input_tokens + work.output_tokens // 2
    itl_1 = decode_step_s(spec, machine, layout, 1, context)

    batch = saturated_batch(spec, layout, mem)
    if itl_target_s is not None:
        while batch > 1 and decode_step_s(spec, machine, layout, batch, context) > itl_target_s:
            batch = max(1, int(batch * 0.8))
    ttft = ttft_s(spec, machine, layout) + transfer
    if batch < 1:
        return Estimates(
            prefill_s=prompt, ttft_s=ttft, itl_s=itl_1, decode_batch=0, itl_at_batch_s=itl_1,
            requests_per_s=0.0, output_tokens_per_s=0.0,
        )  # fmt: skip
    if concurrency is not None:
        return closed_loop(spec, machine, role, layout, mem, batch, concurrency, prompt, transfer)
    step = decode_step_s(spec, machine, layout, batch, context)
    requests = burst_requests / layout.data
    arrival_s *= layout.data
    new, cached = computed_prompt(spec)
    prompt_s = prefill_compute_s(spec, layout, new, spec.max_num_batched_tokens, cached)
    # A prefill-only replica pays no decode, a decode-only one no prefill; a server computes
    # the prompts that replace finished sequences in the steps that decode the others.
    seconds = {
        "server": served_burst_s(spec, machine, layout, mem, batch, requests, arrival_s),
        "prefill": requests * prompt_s,
        "decode": burst_decode_s(spec, machine, layout, batch, requests),
    }[role]
    requests_per_s = burst_requests / seconds
    return Estimates(
        prefill_s=prompt,
        ttft_s=ttft,
        itl_s=itl_1,
        decode_batch=batch,
        itl_at_batch_s=step,
        requests_per_s=requests_per_s,
        output_tokens_per_s=requests_per_s * work.output_tokens,
    )


def closed_loop(
    spec: ModelSpec,
    machine: MachineType,
    role: str,
    layout: Parallelism,
    mem: MemoryBreakdown,
    saturated: int,
    concurrency: int,
    prompt_s: float,
    transfer_s: float,
) -> Estimates:
    """A closed loop of `concurrency` clients on one replica, each sending its next request when
    its last is answered (`servestack bench --url --concurrency`): each DP rank decodes its
    share of them at once, in steps that also compute the prompts of those replacing finished
    ones (`loaded_step_s`), a first token waits for the step of the others running, and each
    client gets one answer per first token plus the decode of the rest of it.

    At most the batch its KV cache holds runs (`saturated`). Where the clients' sequences outgrow
    the cache, the prompts admitted beyond it are preempted and computed again
    (recomputed_prompt_tokens), and those preempted wait after their first token
    (preempted_waiting): the clients' time per output token is the step's times the requests
    in flight over those running. The clients beyond those in flight queue for a first token:
    by Little's law the in-flight ones answer in_flight / cycle requests a second, so each
    client's turn comes every clients / in_flight cycles, and its first token (clients -
    in_flight) / in_flight cycles later than if it had not queued."""
    work = spec.workload
    context = work.input_tokens + work.output_tokens // 2
    clients = math.ceil(concurrency / layout.data)
    recomputed = recomputed_prompt_tokens(spec, mem.kv_capacity_tokens // layout.data, clients)
    # A prefill-only replica hands each prompt's KV cache on and holds none; a decode-only one
    # receives KV caches, not prompts. Only a server computes preempted prompts again.
    waiting = preempted_waiting(spec, recomputed) if role == "server" else 0.0
    running = max(1.0, min(saturated, clients - waiting))
    in_flight = min(float(clients), running + waiting)
    batch = max(1, round(running))
    ttft = ttft_s(spec, machine, layout, running=batch - 1) + transfer_s
    # A server's clients send their next prompt as each answer ends; its prefill shares the
    # others' decode steps.
    if role == "decode":
        step = decode_step_s(spec, machine, layout, batch, context)
    else:
        step = loaded_step_s(spec, machine, layout, batch, context, recomputed)
    per_token = step * in_flight / running
    cycle = {
        "server": ttft + (work.output_tokens - 1) * per_token,
        "prefill": ttft,
        "decode": work.output_tokens * per_token,
    }[role]
    queued = clients - in_flight
    ttft += queued * cycle / in_flight
    requests_per_s = layout.data * in_flight / cycle
    return Estimates(
        prefill_s=prompt_s, ttft_s=ttft, itl_s=per_token, decode_batch=batch,
        itl_at_batch_s=step, requests_per_s=requests_per_s,
        output_tokens_per_s=requests_per_s * work.output_tokens,
    )  # fmt: skip
