"""A replica's estimates: latency at low load, the throughput of a burst of requests queued at
once (served as `serving.plan.speed.burst` lays it out), and a closed loop of clients. A
saturated server decodes as many sequences as its KV cache holds at their average length, not
at their longest."""

from __future__ import annotations

import math

from pydantic import Field

from serving.catalog import MachineType
from serving.frozen import Frozen
from serving.plan.collectives import P2P_LATENCY_S
from serving.plan.memory import MemoryBreakdown, kv_bytes_per_token
from serving.plan.speed.burst import burst, burst_decode_s
from serving.plan.speed.decode import decode_step_s
from serving.plan.speed.mixed import (
    loaded_step_s,
    preempted_waiting,
    recomputed_prompt_tokens,
)
from serving.plan.speed.prefill import computed_prompt, prefill_compute_s, prefill_s, ttft_s
from serving.spec.parts import Parallelism
from serving.spec.profile import ModelSpec

# Throughput is that of this many requests queued at once: `vllm bench serve`'s default
# --num-prompts, the way published serving throughput is measured.
BURST_REQUESTS = 1000


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
    average_length = work.decode_context_tokens
    return min(spec.max_num_seqs, per_rank_tokens // average_length)


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
    context = work.decode_context_tokens
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
        "server": burst(spec, machine, layout, mem, batch, requests, arrival_s).seconds,
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
    context = work.decode_context_tokens
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
