"""A burst of requests queued at once on one DP rank, as vLLM's scheduler serves it: the
opening, in which the first prompts are admitted a token budget at a time while the first of
them decode; the queued phase, in which the rest replace finished sequences in mixed steps; and
the drain, as the last batch's outputs end. Published serving throughput is measured this way
(`vllm bench serve` sends its prompts at once)."""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

from serving.catalog import MachineType
from serving.plan.memory import MemoryBreakdown
from serving.plan.speed.decode import decode_step_s
from serving.plan.speed.mixed import mixed_step_s, queued_phase_s, recomputed_prompt_tokens
from serving.plan.speed.prefill import computed_prompt
from serving.spec.parts import Parallelism
from serving.spec.profile import ModelSpec

DRAIN_POINTS = 24
STAGGER_PHASES = 4


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
    context = work.decode_context_tokens
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


def timed_phases(
    spec: ModelSpec, machine: MachineType, layout: Parallelism, phases: list[tuple[float, int]]
) -> list[tuple[float, int, float]]:
    """Each drain phase (steps, sequences) with the decode step of its sequences at the
    workload's mean context."""
    context = spec.workload.decode_context_tokens
    return [
        (steps, size, decode_step_s(spec, machine, layout, size, context)) for steps, size in phases
    ]


def drain_s(
    spec: ModelSpec, machine: MachineType, layout: Parallelism, batch: int, requests: float
) -> float:
    """Decode time of a full batch of `batch` sequences (or all `requests`, if fewer) once no
    request queues: the batch drains as requests finish (burst_decode_s)."""
    phases = timed_phases(spec, machine, layout, drain_phases(spec, batch, requests))
    return sum(steps * step_s for steps, _, step_s in phases)


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
    context = work.decode_context_tokens

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


class Burst(NamedTuple):
    """A burst of requests on one DP rank, phase by phase (`burst`): how long each phase takes
    and how many output tokens it decodes at what step."""

    opening: Opening  # the first prompts, admitted while the first of them decode
    queued_tokens: float  # output tokens of the requests that waited for a place
    queued_s: float  # the time those requests take to pass through
    queued_step_s: float  # their mixed step (the inter-token latency at saturation)
    drain_s: float  # the last batch's decode once nothing queues
    drain_tokens: float
    drain_token_s: float  # the drain's tokens, each times the step that decoded it

    @property
    def seconds(self) -> float:
        """Time for the DP rank to answer the whole burst."""
        return self.opening.seconds + self.queued_s + self.drain_s

    @property
    def itl_s(self) -> float:
        """Mean inter-token latency over every token the burst decodes: the opening's at its
        mixed step, the queued requests' at theirs, the drain's at its decode steps."""
        start = self.opening
        opening_step = start.seconds / start.steps if start.steps else 0.0
        seconds = (
            start.decoded * opening_step
            + self.queued_tokens * self.queued_step_s
            + self.drain_token_s
        )
        return seconds / (start.decoded + self.queued_tokens + self.drain_tokens)


def burst(
    spec: ModelSpec,
    machine: MachineType,
    layout: Parallelism,
    mem: MemoryBreakdown,
    batch: int,
    requests: float,
    arrival_s: float = 0.0,
) -> Burst:
    """`requests` requests queued at once on one DP rank of a server that decodes at most `batch`
    at a time: the first `batch` prompts fill the batch (`opening`), the rest join it in mixed
    steps as sequences finish (each computed again as often as the KV cache forces,
    `recomputed_prompt_tokens`), then the batch drains (`burst_drain`). `arrival_s`: the
    server's serial work per request before the engine sees it, which paces the opening and,
    likewise, the requests queued after it."""
    first = min(float(batch), requests)
    queued = requests - first
    recomputed = recomputed_prompt_tokens(spec, mem.kv_capacity_tokens // layout.data)
    queued_s, step = queued_phase_s(spec, machine, layout, batch, queued, recomputed)
    start = opening(spec, machine, layout, first, arrival_s)
    drain = timed_phases(spec, machine, layout, burst_drain(spec, batch, requests, start))
    return Burst(
        opening=start,
        queued_tokens=queued * spec.workload.output_tokens,
        queued_s=max(queued_s, queued * arrival_s),
        queued_step_s=step,
        drain_s=sum(steps * step_s for steps, _, step_s in drain),
        drain_tokens=sum(steps * size for steps, size, _ in drain),
        drain_token_s=sum(steps * size * step_s for steps, size, step_s in drain),
    )
