"""The planner's estimates against published vLLM measurements (`tests/calibration_set.py`).

The efficiency constants in `serving.plan.fitted` were fitted on the `fit` rows; the `held` rows
judge them. The acceptance bars for the held rows: at least 80% within ±25%, median |error| at most
15%, and no class (dense decode, MoE decode, saturation, TTFT) below 60% within ±25%; and for the
regimes issue 32 named (calibration_score.REGIMES), at least 3 held rows each and 70% of them
within ±25%. The error
bands the CLI publishes (`serving.plan.accuracy`, generated into `serving.plan.error_bands`) are
recomputed here and must not drift.

Run with `-s` to see the table.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace

import pytest
from calibration_row import Row
from calibration_score import (
    CLASSES,
    REGIMES,
    Scored,
    closed_loop_queue_s,
    measured_bands,
    median_error,
    score,
    table,
    within,
)
from calibration_set import ROWS
from calibration_set_accelmark import ACCELMARK_ROWS
from calibration_set_independent import INDEPENDENT_ROWS
from calibration_set_regimes import MEAN_TPOT_MS, REGIME_ROWS
from calibration_set_wide_ep import WIDE_EP_ROWS
from calibration_sources import FRONTEND_RUNS

from serving.plan.accuracy import ERROR_BANDS
from serving.plan.placement import choose_machine
from serving.plan.planner import plan
from serving.plan.speed.burst import opening

_within = within
_median = median_error


@pytest.fixture(scope="module")
def scored() -> list[Scored]:
    return score(ROWS)


def test_rows_cover_gpus_models_layouts_and_both_parts(scored: list[Scored]) -> None:
    gpus = {s.row.gpu for s in scored}
    assert {"h100-80gb", "h200-141gb", "a100-80gb"} <= gpus
    for part in ("fit", "held"):
        assert {s.row.klass for s in scored if s.row.part == part} == set(CLASSES)
    tensor_sizes = {s.row.profile.get("parallelism", {}).get("tensor", 1) for s in scored}
    assert {1, 2, 4, 8} <= tensor_sizes
    assert {s.row.spec().weights_dtype for s in scored} >= {"bf16", "fp8"}
    assert all(s.row.source and s.row.setup for s in scored)


def test_rows_schedule_as_their_published_runs_did(scored: list[Scored]) -> None:
    """vLLM before 0.14 schedules synchronously unless the run passed --async-scheduling, and
    0.14 and later asynchronously unless told not to (calibration_row.ASYNC); the row's profile
    says which (async scheduling comes with the Ray V2 executor)."""
    for s in scored:
        stated = re.search(r"vLLM (\d+)\.(\d+)", s.row.setup)
        by_default = stated is not None and (int(stated[1]), int(stated[2])) >= (0, 14)
        published_async = by_default or "--async-scheduling" in s.row.setup
        assert s.row.spec().fast_paths.ray_v2_executor == published_async, s.row.label


def test_the_regime_rows_are_split_by_their_rule() -> None:
    """calibration_set_regimes fixed its split before the refit, by runs: within each page the
    new runs alternate fit, held, ..., the first fitted, in the order the page prints them; a
    run's mean TPOT takes the part of its throughput row. calibration_set_independent's,
    calibration_set_wide_ep's and calibration_set_accelmark's pages follow the same rule."""
    parts: dict[str, list[str]] = {}
    for row in REGIME_ROWS + INDEPENDENT_ROWS + WIDE_EP_ROWS + ACCELMARK_ROWS:
        parts.setdefault(row.source, []).append(row.part)
    for page, page_parts in parts.items():
        assert page_parts == [("fit", "held")[i % 2] for i in range(len(page_parts))], page
    throughput = {(r.source, r.setup): r.part for r in ROWS if r.metric == "total_tps"}
    tpot = [r for r in ROWS if r.metric == "burst_tpot"]
    assert len(tpot) == len(MEAN_TPOT_MS)
    for row in tpot:
        assert row.part == throughput[(row.source, row.setup)], row.label


def test_short_prompt_runs_time_the_servers_serial_work() -> None:
    """A short-prompt run gives the rows its duration per request as the server's serial work
    only if the GPU's share of it is small: the planner's GPU time for its prompts is under half
    the run."""
    for run in FRONTEND_RUNS:
        gpu_plan = plan(run.spec(), itl_target_s=math.inf, burst_requests=run.prompts)
        gpu_s = run.prompts / gpu_plan.requests_per_s
        assert gpu_s < 0.5 * run.prompts * run.serial_s, run.source


def test_a_pages_bursts_reach_the_engine_at_its_measured_serial_work() -> None:
    """A page whose short-prompt run measured its server's serial work per request lends it to
    every row of the page, and a burst is planned handed to the engine at that pace: DeepSeek-R1's
    1,000 ShareGPT requests on 8xH200 at 22.3 ms each open over 22.3 s (its P99 time to first
    token is 24.4 s), not over the 28 steps of the token budget their prompts fill, and the
    run's planned throughput falls. Rows of a page without such a run carry none."""
    pages = {run.source: run.serial_s for run in FRONTEND_RUNS}
    for row in ROWS:
        serial = pages.get(row.source.split(" ;")[0])
        if serial is not None and row.metric != "ttft":
            assert row.serial_frontend_s == serial, row.label
    (row,) = [r for r in ROWS if "DeepSeek-R1" in r.setup and "ShareGPT 1,000" in r.setup]
    spec = row.spec()
    layout = spec.parallelism
    machine = choose_machine(spec, layout.gpus_per_replica)
    paced = opening(spec, machine, layout, 1000, row.serial_frontend_s)
    assert paced.seconds == pytest.approx(1000 * row.serial_frontend_s)
    assert opening(spec, machine, layout, 1000).seconds < paced.seconds / 2
    at_once = plan(spec, itl_target_s=math.inf, burst_requests=1000)
    handed = plan(spec, itl_target_s=math.inf, burst_requests=1000, arrival_s=row.serial_frontend_s)
    assert handed.output_tokens_per_s < at_once.output_tokens_per_s


def test_held_back_rows_meet_the_acceptance_bars(scored: list[Scored]) -> None:
    """At least 85% of the held rows within ±25% and median |error| at most 10% (issue 32's
    bars: 92% and 9.0%), every class at least 60% within ±25%. What each TTFT
    source measures and the differences of setup the rows carry (vLLM 0.11's template parse, a
    closed loop's opening wave and queue, chat prompts' spread around their mean) are in
    calibration_set. The held TTFT rows still outside: NIM's Llama-3.3-70B at 500 in
    (TensorRT-LLM's frontend and FP8 prefill are faster than vLLM's: the same page's
    concurrency-1 runs put its floor at 13-20 ms and its prefill at 0.07-0.08 ms per token) and
    DeepSeek-R1 on 8xH200 (slower than planned in every regime: 19.4 ms per token at concurrency
    4 against 18.3, its time to first token at concurrency 4 at -43%; of its rows only the
    random 4K run is fitted), and GPUStack's Qwen3-8B on an H100 at concurrency 8 (-25%): the
    fitted per-request floor is 19.1 ms, where this host's first tokens carry about 50 ms beyond
    their prefill (docs/explanation/planner.md)."""
    print("\n" + table(scored))
    held = [s for s in scored if s.row.part == "held"]
    assert _within(held) >= 0.85
    assert _median(held) <= 0.10
    for klass in CLASSES:
        assert _within([s for s in held if s.row.klass == klass]) >= 0.6, klass


def _regime_held(scored: list[Scored], name: str) -> list[Scored]:
    return [s for s in scored if s.row.part == "held" and REGIMES[name](s.row)]


# MLA at TP8 on Hopper is DeepSeek-R1 on 8xH200 (GPUStack on vLLM 0.11, dstack on vLLM 0.7.4's
# V0 engine), 9 of its 12 held rows within ±25% since block-FP8 experts are priced by the kernel
# vLLM runs them on (serving.plan.speed.roofline._expert_math_flops; 8 before, its 32K-prompt
# throughput at +25.5%). Outside: GPUStack's TTFT at concurrency 4 (-43%) and 2K-prompt
# throughput (+34%: the run's median inter-token latency, 358 ms, is a step that carries a
# prompt chunk, about 280 ms as planned), and dstack's 6,400-token outputs at concurrency 128
# (-44%), whose sequences outgrow the KV cache and, all of one length, finish in waves: the
# closed loop counts the preempted requests' wait as if each waited alone, and scheduler_replay
# holds 7 to 20 times as many waiting (that run's TTFT averages 1,060 s). Every GPUStack
# DeepSeek throughput run still reads fast (+10% to +34%).
@pytest.mark.parametrize("name", list(REGIMES))
def test_each_regime_holds_on_its_held_rows(scored: list[Scored], name: str) -> None:
    """At least 3 held rows, 70% of them within ±25% (regime_table prints them by GPU). DP+EP
    across nodes: the published vLLM runs with their setup stated (calibration_set_wide_ep),
    llm-d 0.3's decode and prefill bars and llm-d's EP-16 decode tables; the prefill bars ran
    DeepEP's high-throughput all-to-all, which serving.plan.collectives models apart from the
    decode runs' low-latency kernels."""
    held = _regime_held(scored, name)
    assert len(held) >= 3
    assert _within(held) >= 0.7


# Published runs read for the short regimes (MLA at TP8 on Hopper, TTFT at concurrency 1,
# DP+EP across nodes) and left out, so the next search starts past them; none is a row: each
# lacks a figure or a setup a row needs, or is not vLLM on a catalog GPU.
# - github.com/ree2raz/inference-bench: vLLM 0.20.1 at concurrency 1 on A100 40GB and 80GB. It
#   keeps only the median TTFT, its 100 short chat prompts hold 49 distinct texts (prefix-cache
#   hits by vLLM's default), and it gives their length only as "<= 256" / "~200 tokens".
# - github.com/yobitelcomm/bench validation-runs: vLLM 0.21/0.22 on H100s, median TTFT only,
#   the built-in prompts' lengths not given with the runs, the 72B run's layout not stated.
# - github.com/tenstorrent/tt-inference-server/issues/356: DeepSeek-R1-0528-AWQ on 8xH100 under
#   vLLM at concurrency 1: no vLLM version or serve flags, 2 to 4 requests a point, TTFT not
#   rising with the prompt (4,096 tokens 120.1 ms, 3,072 tokens 131.7 ms); W4A16 experts.
# - docs.vultr.com/inference-cookbook/cuda: vLLM 0.12/0.16 on B200 only; of its models only
#   MiniMax-M2.5 has a form the planner models (the others hybrid Mamba, NAS-pruned or sparse
#   attention), one concurrency-1 run.
# - vLLM pull requests with `vllm bench serve` at concurrency 1 on H200 (#36559, #43677):
#   builds of the day's main; each block's serve command is not stated beside it.
# - docs.ngkore.org "Benchmarking LLModels with vLLM": no GPU stated; io.net's TTFT table: no
#   engine or setup; Red Hat's MLA post (Feb 2025): ratios only; vLLM's GB200 wide-EP post:
#   Blackwell; no llm-d or vLLM wide-EP chart on Hopper beyond calibration_set_wide_ep's.
# - llm-d's later releases: v0.4's DeepSeek-V3.1 latency claim on H200 is a chart without a
#   setup, v0.5's wide-EP results are B200s; its GLM-5.2 guide (EP 16 decode on H200s) runs a
#   nightly vLLM on an agentic trace of ~55K-token prompts, not lengths a row can state.
# - UCCL's EP runs of vLLM 0.20 on two AWS p5en (issue #926, PRs #628 and #740): EFA rather
#   than a catalog machine's RDMA NICs, at a request rate of 1 to 10 a second.
def test_dp_ep_across_nodes_counts_only_expert_groups_wider_than_a_machine() -> None:
    """The regime is DP+EP whose all-to-alls leave the node: on 8-GPU H200 machines, EP 8 (DP 8
    at TP 1) stays inside one node and EP 16 does not; expert parallelism without DP is not
    DP+EP."""
    (row,) = [
        r for r in WIDE_EP_ROWS if r.profile["parallelism"]["data"] == 32 and r.metric == "tpot"
    ]
    across = REGIMES["DP+EP across nodes"]

    def with_layout(**parallelism: object) -> Row:
        return replace(row, profile=row.profile | {"parallelism": parallelism})

    assert across(row)
    assert across(with_layout(tensor=1, data=16, expert=True))
    assert not across(with_layout(tensor=1, data=8, expert=True))
    assert not across(with_layout(tensor=8, expert=True))


def test_closed_loop_arrivals_wait_for_each_others_serial_work() -> None:
    """After the opening wave, an arrival waits only while another client's serial work holds
    the API server's loop: nothing alone, more with more clients, a small share of that work
    at these loads."""
    qwen = {s.row.batch: s.row for s in score(ROWS) if "qwen3-8b" in s.row.label
            and s.row.metric == "ttft"}  # fmt: skip
    waits = {}
    for concurrency, row in qwen.items():
        spec = row.spec()
        layout = spec.parallelism
        machine = choose_machine(spec, layout.gpus_per_replica)
        waits[concurrency] = closed_loop_queue_s(row, spec, machine, layout)
    assert waits[1] == 0.0
    assert 0 < waits[4] < waits[8] < 0.1 * qwen[8].serial_frontend_s


def test_fit_rows_stay_where_the_constants_were_fitted(scored: list[Scored]) -> None:
    """A change to the model that moves the fitted rows must come with a refit."""
    fit = [s for s in scored if s.row.part == "fit"]
    # The fit spreads the misfit over the 88 fit rows, whose regimes (saturated KV-bound runs,
    # large MoE models on A100s, saturated inter-token latency, MLA at TP8, DP+EP decode and
    # prefill across nodes) pull the shared constants apart. Its soft-L1 loss
    # (scripts/fit_speed_constants.py, LOSS) lets the few rows no term explains sit outside
    # rather than drag the rest: 94% within ±25% at a median of 8.7%.
    assert _within(fit) >= 0.9
    assert _median(fit) <= 0.12


def test_published_error_bands_are_what_the_held_rows_measure(scored: list[Scored]) -> None:
    """serving/plan/error_bands.py is generated from these rows (scripts/fit_speed_constants.py
    --bands); the bands the CLI publishes are the ones they measure today."""
    bands = measured_bands([s for s in scored if s.row.part == "held"])
    print("\n" + "\n".join(f"{kind}: {band}" for kind, band in sorted(bands.items())))
    assert bands == ERROR_BANDS
