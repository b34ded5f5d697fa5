"""The plan's estimate for what a `bench --url` run measured, and measured / estimated.

The estimate is the planner's (`serving.plan.planner.plan`, uncalibrated, so that a
calibration is made against the model it scales) for the spec with its workload set to what the
run sent: the mean prompt and output tokens the server reported in usage (a real tokenizer
counts the bench's words as more tokens than one each), else the workload's. Under a closed loop
of N clients the plan's min replicas are taken to share them evenly (ceil(N / replicas) each) and
the service's throughput is theirs together; under an open loop at R requests/s the concurrency
is what Little's law gives from the run itself (requests/s x mean end to end).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import Field

from serving.frozen import Frozen
from serving.local.bench.stats import RequestResult, WorkloadReport, figure
from serving.plan.planner import plan
from serving.spec.parts import Workload
from serving.spec.profile import ModelSpec

# Measured figure (a report's dotted name) per estimate.
MEASURED = {
    "ttft_p50": "ttft_s.p50",
    "itl_p50": "itl_s.p50",
    "tpot_p50": "tpot_s.p50",
    "requests_per_s": "requests_per_s",
    "output_tokens_per_s": "output_tokens_per_s",
}


class Estimate(Frozen):
    """The plan's figures for one workload at one concurrency."""

    input_tokens: int
    output_tokens: int
    concurrency: int = Field(description="Clients in flight, over the whole service.")
    replicas: int = Field(description="The plan's min replicas, sharing the clients evenly.")
    ttft_p50: float = Field(description="Seconds.")
    itl_p50: float = Field(description="Seconds.")
    tpot_p50: float = Field(description="Seconds: the plan's ITL at the same batch.")
    requests_per_s: float
    output_tokens_per_s: float


def mean_tokens(results: Sequence[RequestResult], fallback: Workload) -> Workload:
    """The prompt and output tokens the server reported, on average, else the workload's."""
    done = [r for r in results if r.ok]
    prompt = [r.prompt_tokens for r in done if r.prompt_tokens]
    output = [r.output_tokens for r in done if r.output_tokens]
    return Workload(
        input_tokens=round(sum(prompt) / len(prompt)) if prompt else fallback.input_tokens,
        output_tokens=round(sum(output) / len(output)) if output else fallback.output_tokens,
    )


def little_concurrency(results: Sequence[RequestResult], requests_per_s: float) -> int:
    """Requests in flight on average under an open loop: rate x mean end to end."""
    done = [r.end_s - r.start_s for r in results if r.ok]
    if not done:
        return 1
    return max(1, round(requests_per_s * sum(done) / len(done)))


def estimate(spec: ModelSpec, workload: Workload, concurrency: int) -> Estimate:
    """The plan's figures for `workload` with `concurrency` clients over the service."""
    replicas = max(1, spec.autoscaling.min_replicas)
    shaped = spec.model_copy(update={"workload": workload})
    per_replica = math.ceil(concurrency / replicas)
    planned = plan(shaped, concurrency=per_replica)
    service = min(replicas, concurrency)  # replicas that get any client at all
    return Estimate(
        input_tokens=workload.input_tokens, output_tokens=workload.output_tokens,
        concurrency=concurrency, replicas=replicas, ttft_p50=planned.ttft_s,
        itl_p50=planned.itl_s, tpot_p50=planned.itl_s,
        requests_per_s=planned.requests_per_s * service,
        output_tokens_per_s=planned.output_tokens_per_s * service,
    )  # fmt: skip


def ratios(report: WorkloadReport, planned: Estimate) -> dict[str, float]:
    """Measured / estimated, per figure both sides have."""
    found = {}
    for name, field in MEASURED.items():
        measured, estimated = figure(report, field), getattr(planned, name)
        if measured is not None and estimated:
            found[name] = measured / estimated
    return found
