"""The calibration set scored: the planner's estimate for each row, the share within ±25%, the
median error, the error bands the held rows measure (scripts/fit_speed_constants.py writes them
into serving/plan/error_bands.py), the table of every row, and the README's held-back table."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from calibration_row import Row
from calibration_set import ROWS

from serving.catalog import MachineType
from serving.plan import fitted
from serving.plan.accuracy import ErrorBand
from serving.plan.memory import memory
from serving.plan.placement import choose_machine
from serving.plan.planner import decode_step_s, plan, prefill_s, ttft_s
from serving.plan.speed.burst import burst
from serving.plan.speed.saturation import saturated_batch
from serving.spec.parts import Parallelism
from serving.spec.profile import ModelSpec


def estimate(row: Row) -> float:
    """The planner's figure for the row's metric, in the row's unit, for the engine the row's
    vLLM ran (v0_host_time)."""
    with v0_host_time(row):
        return _estimate(row)


@contextmanager
def v0_host_time(row: Row) -> Iterator[None]:
    """While a row measured on vLLM's V0 engine is estimated, each engine step's fixed cost is
    V1's (fitted.STEP_OVERHEAD_S) plus the host time V0 spent beyond it
    (fitted.V0_STEP_OVERHEAD_S): a synchronous decode step and every prefill chunk pay it
    (serving.plan.speed.decode, prefill). The speed model itself plans V1 servers and never
    reads the V0 term; a V1 row is estimated as the planner plans."""
    if row.engine == "v1":
        yield
        return
    v1 = fitted.STEP_OVERHEAD_S
    fitted.STEP_OVERHEAD_S = v1 + fitted.V0_STEP_OVERHEAD_S
    try:
        yield
    finally:
        fitted.STEP_OVERHEAD_S = v1


def _estimate(row: Row) -> float:
    spec = row.spec()
    work = spec.workload
    if row.metric == "tpot":
        if row.closed_loop:
            # The planner's closed loop of `batch` clients (serving.plan.speed.saturation,
            # closed_loop): mixed steps with the replacements' prompts, at most the batch the
            # KV cache holds, the prompts a full cache makes it compute again, and the wait of
            # the requests it preempts.
            looped = plan(spec, itl_target_s=math.inf, concurrency=row.batch)
            return 1e3 * looped.groups[0].estimates.itl_s
        layout = spec.parallelism
        machine = choose_machine(spec, layout.gpus_per_replica)
        context = work.decode_context_tokens
        return 1e3 * decode_step_s(spec, machine, layout, row.batch, context)
    if row.metric == "ttft":
        layout = spec.parallelism
        machine = choose_machine(spec, layout.gpus_per_replica)
        return 1e3 * (
            ttft_s(spec, machine, layout, running=row.batch - 1, spread=not row.fixed_prompts)
            + row.retired_frontend_s
            + opening_wave_s(row, spec, machine, layout)
            + closed_loop_queue_s(row, spec, machine, layout)
        )
    if row.metric == "burst_tpot":
        assert row.prompts is not None, f"{row.label}: the setup states no number of prompts"
        layout = spec.parallelism
        machine = choose_machine(spec, layout.gpus_per_replica)
        mem = memory(spec, layout)
        batch = saturated_batch(spec, layout, mem)
        requests = row.prompts / layout.data
        arrival_s = row.serial_frontend_s * layout.data
        return 1e3 * burst(spec, machine, layout, mem, batch, requests, arrival_s).itl_s
    # Published saturation runs queue every request at once with no latency target: the server
    # decodes at the batch its KV cache allows, not the batch a profile's ITL target would keep;
    # the burst is the run's own number of prompts, handed to the engine at the measured
    # server's serial work per request where its page measured it (speed.burst.opening).
    if row.metric == "prefill":
        model_plan = plan(spec, itl_target_s=math.inf)
        return 1e3 * model_plan.groups[0].estimates.prefill_s
    assert row.prompts is not None, f"{row.label}: the setup states no number of prompts"
    model_plan = plan(
        spec, itl_target_s=math.inf, burst_requests=row.prompts, arrival_s=row.serial_frontend_s
    )
    if row.metric == "output_tps":
        return model_plan.output_tokens_per_s
    return model_plan.requests_per_s * (work.input_tokens + work.output_tokens)


def opening_wave_s(row: Row, spec: ModelSpec, machine: MachineType, layout: Parallelism) -> float:
    """What the run's first requests add to its mean TTFT. `vllm bench serve --max-concurrency
    c` creates a task for every prompt at once and a semaphore of c admits the first c together
    (vllm/benchmarks/serve.py, benchmark(), vLLM 0.11.0); after them a finished request is
    replaced one at a time. The i-th of that opening wave waits i times for whichever is slower:
    the API server's per-request work that runs serially on its event loop (what the row
    states: the server's measured serial work per request, else at least the template parse it
    retired), or one more prompt's share of the batched prefill in the engine (the prefill of c
    prompts less that of one, per extra prompt: a memory-bound prefill batches almost free).
    The wave's mean wait, (c - 1) / 2 of those, counts for c of the run's N requests."""
    concurrency = row.batch
    if concurrency == 1:
        return 0.0
    assert row.prompts is not None, f"{row.label}: the setup states no number of prompts"
    tokens = spec.workload.input_tokens
    one = prefill_s(spec, machine, layout, tokens)
    batched = prefill_s(spec, machine, layout, concurrency * tokens, sampled=concurrency)
    per_prompt = max(_serial_s(row), (batched - one) / (concurrency - 1))
    return concurrency / row.prompts * (concurrency - 1) / 2 * per_prompt


def _serial_s(row: Row) -> float:
    """The measured server's serial work per request on its API server's event loop: what the
    row states, else at least the template parse it retired."""
    return max(row.serial_frontend_s, row.retired_frontend_s)


def closed_loop_queue_s(
    row: Row, spec: ModelSpec, machine: MachineType, layout: Parallelism
) -> float:
    """What the rest of a closed-loop run (after its opening wave) adds to its mean TTFT: a
    request that arrives while another's serial work holds the API server's event loop waits
    for it. In a closed loop each of the other c - 1 clients sends its next request when its
    previous one ends, so they arrive about every cycle (first token plus the decode of the
    rest) and hold the loop for a share rho = (c - 1) x serial / cycle of the time; with
    deterministic service the mean wait is that of an M/D/1 queue, rho x serial / (2 (1 -
    rho)). The engine does not queue them: the prompts of c clients fit one step's token
    budget (max_num_batched_tokens) many times over, so a second prompt joins the same step."""
    concurrency = row.batch
    serial = _serial_s(row)
    if concurrency == 1 or serial == 0.0:
        return 0.0
    assert row.prompts is not None, f"{row.label}: the setup states no number of prompts"
    work = spec.workload
    assert concurrency * work.input_tokens <= spec.max_num_batched_tokens, row.label
    context = work.decode_context_tokens
    first = ttft_s(spec, machine, layout, concurrency - 1, spread=not row.fixed_prompts)
    first += row.retired_frontend_s
    decode = (work.output_tokens - 1) * decode_step_s(spec, machine, layout, concurrency, context)
    rho = (concurrency - 1) * serial / (first + decode)
    steady_share = (row.prompts - concurrency) / row.prompts
    return steady_share * rho * serial / (2 * (1 - rho))


@dataclass(frozen=True)
class Scored:
    row: Row
    estimated: float

    @property
    def error(self) -> float:
        return self.estimated / self.row.published - 1


def score(rows: list[Row]) -> list[Scored]:
    return [Scored(row, estimate(row)) for row in rows]


TOLERANCE = 0.25
CLASSES = ("dense decode", "moe decode", "ttft", "saturation")


def _layout(row: Row) -> dict[str, object]:
    return dict(row.profile.get("parallelism", {}))


def _saturated(row: Row) -> bool:
    return row.metric in ("output_tps", "total_tps")


def _expert_parallel_across_nodes(row: Row) -> bool:
    """DP+EP whose expert-parallel group spans more GPUs than the machine it is planned on
    holds, so that every MoE layer's all-to-all leaves the node."""
    spec = row.spec()
    layout = spec.parallelism
    if not (layout.expert and layout.data > 1):
        return False
    machine = choose_machine(spec, layout.gpus_per_replica)
    return layout.expert_parallel_size > machine.gpus_per_node


# The regimes issue 32 names, which cut across the classes: where the planner missed runs it was
# not fitted to. A row may fall in several, or in none.
REGIMES: dict[str, Callable[[Row], bool]] = {
    "saturated dense": lambda r: _saturated(r) and not r.spec().architecture.is_moe,
    "saturated MoE": lambda r: _saturated(r) and r.spec().architecture.is_moe,
    "MLA at TP8 on Hopper": lambda r: (
        r.spec().architecture.attention == "mla"
        and _layout(r).get("tensor") == 8
        and r.gpu in ("h100-80gb", "h200-141gb")
    ),
    "large MoE on A100": lambda r: (
        r.spec().architecture.is_moe
        and r.spec().architecture.total_params > 100e9
        and r.gpu.startswith("a100")
    ),
    "ITL under concurrency": lambda r: (
        r.metric == "burst_tpot" or (r.metric == "tpot" and r.batch > 1)
    ),
    "TTFT at concurrency 1": lambda r: r.metric in ("ttft", "prefill") and r.batch == 1,
    "DP+EP across nodes": lambda r: _expert_parallel_across_nodes(r),
}


def regime_table(scored: Sequence[Scored]) -> str:
    """Each regime's held rows, overall and per GPU: how many, the share within ±25%, the
    median |error|; and how many rows it has in the fit part."""
    lines = [f"{'regime':24} {'GPU':12} {'fit':>4} {'held':>5} {'within':>7} {'median':>7}"]
    for name, belongs in REGIMES.items():
        rows = [s for s in scored if belongs(s.row)]
        held = [s for s in rows if s.row.part == "held"]
        fit = len(rows) - len(held)
        if not held:
            lines.append(f"{name:24} {'all':12} {fit:4} {0:5} {'-':>7} {'-':>7}")
            continue
        lines.append(
            f"{name:24} {'all':12} {fit:4} {len(held):5} {within(held):7.0%} "
            f"{median_error(held):7.1%}"
        )
        for gpu in sorted({s.row.gpu for s in held}):
            on_gpu = [s for s in held if s.row.gpu == gpu]
            lines.append(
                f"{'':24} {gpu:12} {'':4} {len(on_gpu):5} {within(on_gpu):7.0%} "
                f"{median_error(on_gpu):7.1%}"
            )
    return "\n".join(lines)


def within(rows: Sequence[Scored]) -> float:
    """Share of the rows within ±25% of the published figure."""
    return sum(abs(s.error) <= TOLERANCE for s in rows) / len(rows)


def median_error(rows: Sequence[Scored]) -> float:
    return statistics.median(abs(s.error) for s in rows)


def readme_error_table() -> str:
    """The README's table: held-back error by class of estimate and GPU."""
    held = [s for s in score(ROWS) if s.row.part == "held"]
    lines = [
        "| estimate | GPU | held-back runs | within ±25% | median \\|error\\| | worst |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for klass in CLASSES:
        for gpu in sorted({s.row.gpu for s in held if s.row.klass == klass}):
            rows = [s for s in held if s.row.klass == klass and s.row.gpu == gpu]
            worst = max((s.error for s in rows), key=abs)
            lines.append(
                f"| {klass} | {gpu} | {len(rows)} | {within(rows):.0%} | "
                f"{median_error(rows):.0%} | {worst:+.0%} |"
            )
    worst = max((s.error for s in held), key=abs)
    lines.append(
        f"| all | all | {len(held)} | {within(held):.0%} | {median_error(held):.0%} "
        f"| {worst:+.0%} |"
    )
    return "\n".join(lines)


def readme_regime_table() -> str:
    """The docs' table of the regimes issue 32 named: held rows by GPU, and fit rows."""
    scored = score(ROWS)
    lines = [
        "| regime | GPU | held-back runs | within ±25% | median \\|error\\| | fit runs |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for name, belongs in REGIMES.items():
        rows = [s for s in scored if belongs(s.row)]
        held = [s for s in rows if s.row.part == "held"]
        fit = len(rows) - len(held)
        if not held:
            lines.append(f"| {name} | all | 0 | — | — | {fit} |")
            continue
        for gpu in sorted({s.row.gpu for s in held}):
            on_gpu = [s for s in held if s.row.gpu == gpu]
            lines.append(
                f"| {name} | {gpu} | {len(on_gpu)} | {within(on_gpu):.0%} | "
                f"{median_error(on_gpu):.0%} | |"
            )
        lines.append(
            f"| {name} | all | {len(held)} | {within(held):.0%} | {median_error(held):.0%} "
            f"| {fit} |"
        )
    return "\n".join(lines)


def _kind(row: Row) -> tuple[bool, str]:
    """The kind of estimate a row measures: (is_moe, phase) as serving.plan.accuracy keys it."""
    phase = {"tpot": "decode", "burst_tpot": "decode", "ttft": "ttft", "prefill": "ttft"}.get(
        row.metric, "saturation"
    )
    return row.spec().architecture.is_moe, phase


def error_band_of(rows: Sequence[Scored]) -> ErrorBand:
    errors = sorted(abs(s.error) for s in rows)
    # the smallest |error| that 80% of the points stay within
    band = errors[max(0, math.ceil(0.8 * len(errors)) - 1)]
    worst = max((s.error for s in rows), key=abs)
    return ErrorBand(
        points=len(rows),
        median=round(median_error(rows), 2),
        band=round(band, 2),
        worst=round(worst, 2),
    )


def measured_bands(scored: Sequence[Scored]) -> dict[tuple[bool, str], ErrorBand]:
    """The error band of each kind of estimate among these rows."""
    by_kind: dict[tuple[bool, str], list[Scored]] = {}
    for s in scored:
        by_kind.setdefault(_kind(s.row), []).append(s)
    return {kind: error_band_of(rows) for kind, rows in by_kind.items()}


def table(scored: Sequence[Scored]) -> str:
    """Every row with its estimate and error, then each part's and class's share within ±25%."""
    lines = [
        f"{'part':4} {'class':12} {'setup':62} {'published':>10} {'estimate':>10} {'error':>6}",
    ]
    for s in sorted(scored, key=lambda s: (s.row.part, CLASSES.index(s.row.klass), s.row.label)):
        lines.append(
            f"{s.row.part:4} {s.row.klass:12} {s.row.label:62} {s.row.published:10.2f} "
            f"{s.estimated:10.2f} {s.error:+6.0%}"
        )
    for part in ("fit", "held"):
        rows = [s for s in scored if s.row.part == part]
        lines.append(
            f"{part}: {len(rows)} rows, {within(rows):.0%} within ±25%, "
            f"median |error| {median_error(rows):.1%}"
        )
        for klass in CLASSES:
            of_class = [s for s in rows if s.row.klass == klass]
            lines.append(
                f"  {klass:12} {len(of_class):2} rows, {within(of_class):4.0%} within ±25%, "
                f"median {median_error(of_class):.1%}"
            )
    return "\n".join(lines)
