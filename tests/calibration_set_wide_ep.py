"""Calibration rows for DP+EP across nodes (wide EP), the regime issue 32 found with no
published run in the set: DeepSeek-R1's decode on H200s at expert-parallel sizes of 32, 72 and
96 (4, 9 and 12 nodes) and its prefill at 8, 16 and 32, and llm-d's EP-16 decode tables.

Where they were read. The llm-d 0.3 release post ("Wide-EP Performance",
https://llm-d.ai/blog/llm-d-v0.3-expanded-hardware-faster-perf-and-igw-ga; its figure
static/img/blog-assets/wide_ep_decode.webp in github.com/llm-d/llm-d.github.io) and vLLM's
"Large Scale Serving: DeepSeek @ 2.2k tok/s/H200 with Wide-EP"
(https://blog.vllm.ai/2025/12/17/large-scale-serving.html; the same figure as
assets/figures/2025-12-17-large-scale-serving/decode_throughput.png in
github.com/vllm-project/vllm-project.github.io, byte for byte the same chart) publish one bar
chart, "Decode Throughput: 2000 ISL, 2000 OSL (avg), 256 Concurrent Requests / EP Rank", output
tokens/s per GPU at expert-parallel sizes 32, 72 and 96. The vLLM post says where: "a Coreweave
H200 cluster connected using Infiniband with ConnectX-7 NICs", in "production-like, multi-node
deployments" with prefill and decode disaggregated, Dual Batch Overlap (DBO) on for decode, and
DeepEP's all-to-all kernels; llm-d's wide-EP guide of that release
(guides/wide-ep-lws/manifests/modelserver/base/decode.yaml) serves deepseek-ai/DeepSeek-R1-0528
(its FP8 checkpoint) with `--enable-expert-parallel`, `--data-parallel-size-local 8` (one rank
per GPU, TP 1) and `VLLM_ALL2ALL_BACKEND=deepep_low_latency`, without `--async-scheduling`.
Neither page gives the vLLM build beyond llm-d 0.3's images (autumn 2025, after v0.11.0
removed the V0 engine, as the vLLM post says).

How the bars were read. The chart is 1,200 x 742 pixels; its gridlines (0 to 2,500 by 500) sit
452 pixels apart from 0 to 2,500, 5.53 tokens/s a pixel; the bars' tops, against the 2,000
line, read 2,180, 2,069 and 1,970 tokens/s per GPU, each to about 6 tokens/s (one pixel). vLLM's
GB200 post (https://blog.vllm.ai/2026/02/03/dsr1-gb200-part1.html, its topline chart) labels
an H200 decode deployment of 32 GPUs at 2,000 in / 2,000 out "2200" and calls it the earlier
post's 2.2k: the EP-32 bar, rounded.

What a row is. A decode rank holds 256 requests at once; with prompts prefilled on other
nodes (each prompt's prefill and KV transfer a fraction of a second against about 230 s of
decoding), all 256 decode in every step, so a GPU's output rate is 256 tokens a step: the
row's mean time per decode step is 256 / (tokens/s per GPU), a `tpot` row at batch 256 per DP
rank and the context of the run's middle token, 2,000 + 1,000 (calibration_score.estimate).
The profile is the run's: DeepSeek-V3's architecture (R1's), FP8, DP = EP, TP 1, vLLM's Hopper
defaults, and `enable_dbo` and `all2all_backend` as engine arguments. It is planned on GKE's
a3-ultragpu-8g, whose eight 400 Gb/s RDMA NICs give each H200 the same 400 Gb/s ConnectX-7
link as the measured cluster.

What the planner leaves out. It has no term for DBO (two micro-batches, each one's
all-to-all overlapping the other's computation, above 32 decode tokens per rank: vLLM 0.22's
dbo_decode_token_threshold): its decode step adds the all-to-all to the computation. Nor does
it read EPLB's expert placement, or DeepEP's low-latency kernels beyond their measured
bandwidth (serving.plan.collectives.CROSS_NODE_ALLTOALL_EFFICIENCY). The same posts say
earlier runs without DBO and without later kernel fixes reached about 1,500 tokens/s per GPU;
that figure has no published setup and is not a row.

The same posts' prefill chart, "Prefill Throughput": prompt tokens/s per GPU at EP 8, 16 and 32
for 2,000 input tokens and 1 output at an unbounded request rate, the prefill side of the same
P/D deployments: 6,514, 7,011 and 5,095, read off
assets/figures/2025-12-17-large-scale-serving/prefill_throughput.png (its gridlines 112.75
pixels per 2,000, each bar to about 18 tokens/s). The prefill workers' flags are in the guide's
prefill manifest (guides/wide-ep-lws/manifests/modelserver/base/prefill.yaml; its only stored
version, 03da3b0, has a merge conflict in the image line alone): `--enable-expert-parallel`,
DP over 8 GPUs a node at TP 1, `VLLM_ALL2ALL_BACKEND=deepep_high_throughput`, DeepGEMM, and no
`--max-num-batched-tokens` or `--max-num-seqs`, so vLLM's defaults for an API server on a GPU of
70 GiB or more: 8,192 tokens and 1,024 sequences a step (VLLM_HOPPER). A row is the replica's
total tokens/s, prompt tokens/s per GPU x EP x 2,001 / 2,000, planned as a burst of 1,000
prompts (the chart states none; 10,000 moves the estimate by under 0.1%) on DeepEP's
high-throughput all-to-all (serving.plan.collectives). EP 8 sits on one node, so its row is a
saturated MoE row, not a wide one.

Not a row: Anyscale's 2.4k tokens/s per H200 (Ray Serve LLM wide-EP post), whose setup is not
published with it.

Later runs at EP 16 (2 nodes), from llm-d's own guides, each a table of one benchmark:
`2048_concurrent_2k_isl_2k_osl`, 2,048 clients in a closed loop (inference-perf) against
DeepSeek-R1-0528 on 32 H200s, two prefill workers of DP 8 and one decode worker of DP 16 at TP 1,
P/D disaggregated over NIXL. The decode worker holds 2,048 / 16 = 128 requests a rank, and every
figure is the decode GPUs' output rate, so a row is the mean decode step of 128 sequences,
128 / (tokens/s per decode GPU), at the run's own mean lengths (input and output tokens/s over
requests/s).
- The DP-aware guide (guides/wide-ep-lws/experimental-dp-aware/README.md in
  github.com/llm-d/llm-d, commit 05126b7; its decode manifest, manifests/modelserver/base/
  decode.yaml at 04291b7: image llm-d-cuda v0.7.0, `--all2all-backend deepep_low_latency`, no
  DBO, no EPLB) measured it on CoreWeave with InfiniBand and on GKE with RoCE, with vLLM's DP
  supervisor (one API server a rank, the router balancing the ranks). Its Hybrid-LB column (one
  server a node, 21% fewer tokens on the same cluster) is left out: the difference is how evenly
  the router fills the ranks, and the planner plans them filled evenly.
- The wide-EP guide of a later release (guides/wide-ep/README-lws.md at 018994e, its only
  results table; later versions of guides/wide-ep/README.md repeat it, while README.md at 52c210c
  holds none; its decode manifest, modelserver/gpu/lws/vllm/base/decode.yaml at 28539d9, the
  same flags as the later DisaggregatedSet's, vllm-deepseek-r1-0528/base/disaggregatedset.yaml
  at bf09bb9: a vLLM 0.23-0.24 build of llm-d's, decode with `--enable-dbo
  --dbo-decode-token-threshold 32`, `--all2all-backend deepep_low_latency`, 256 sequences and
  256 tokens a step) on CoreWeave.
Left out: vLLM's wide-EP example (examples/online_serving/wide_ep, from vLLM PR #29284, 2,387
tokens/s per H200 at EP 32 on Nebius): its decode-only benchmark fills the KV cache with dummy
values (DecodeBenchConnector) and routes tokens to experts uniformly at random
(VLLM_MOE_ROUTING_SIMULATION_STRATEGY), and the PR's "1:512" workload is not its script's 2 in
/ 256 out. llm-d 0.5's wide EP on B200s (guides/wide-ep-lws/README.md, "Benchmarking Report", and
https://llm-d.ai/blog/llm-d-v0.5-sustaining-performance-at-scale: DeepSeek-R1-0528 on 4
a4-highgpu-8g, decode DP 16 + EP 16, 49,784 output tokens/s at 250 requests/s): a sweep of request
rates whose decode batch per rank is stated nowhere, with EPLB and hybrid load balancing, on a GPU
generation nothing here is fitted on. The same guide's full report of the Hybrid-LB run above
(mean TPOT 79.7 ms, mean TTFT 21.3 s): left out with its column. It shows what the EP 16 rows
assume: there a request spent about an eighth of its cycle before its first token, fewer than
128 clients a rank decoded at once, and the step read as 128 / (tokens/s per GPU), 92.6 ms, is
that much longer than the TPOT measured. The DP-supervisor runs publish no TTFT; where their
first tokens waited too, their rows' steps run long by as much.

The split follows calibration_set_regimes' rule, by runs, in the order each page prints them:
fit, held, fit for the decode chart, then held, fit, held for the prefill chart's runs, which
continue the same page; fit, held for the DP-aware guide; fit for the later guide
(tests/serving/plan/test_published_measurements.py checks it).
"""

from __future__ import annotations

from typing import Any

from calibration_row import ASYNC, SYNC, VLLM_HOPPER, Part, Row, _p

WIDE_EP = (
    "https://llm-d.ai/blog/llm-d-v0.3-expanded-hardware-faster-perf-and-igw-ga#wide-ep-performance"
    " (figure static/img/blog-assets/wide_ep_decode.webp in github.com/llm-d/llm-d.github.io); "
    "https://blog.vllm.ai/2025/12/17/large-scale-serving.html (the same figure)"
)
_SERVE = (
    "DeepSeek-R1-0528 FP8 on CoreWeave H200s (InfiniBand ConnectX-7), P/D disaggregated, decode "
    "DP+EP at TP 1, DBO, DeepEP low-latency all-to-all"
)
# DeepSeek-R1's own context length (max_position_embeddings); the runs set none.
_CONTEXT = 163840
# 256 requests decode on every rank (the chart's "256 Concurrent Requests / EP Rank").
BATCH_PER_RANK = 256
# The run's engine arguments, as vLLM 0.22 names them.
_ENGINE_ARGS = {"enable_dbo": True, "all2all_backend": "deepep_low_latency"}


def _dp_ep_profile(
    ranks: int, lengths: tuple[int, int], engine_args: dict[str, Any], context: int = _CONTEXT,
    scheduling: dict[str, Any] = SYNC, **serving: int,
) -> dict[str, Any]:  # fmt: skip
    """DeepSeek-R1 on `ranks` H200s at DP = EP, TP 1, vLLM's Hopper defaults, scheduled as the
    run's vLLM did (`scheduling`: calibration_row.SYNC or ASYNC)."""
    profile = _p("deepseek-v3", "h200-141gb", 1, workload=lengths, max_model_len=context,
                 engine_args=engine_args, **scheduling, **(VLLM_HOPPER | serving))  # fmt: skip
    profile["parallelism"] = {"tensor": 1, "data": ranks, "expert": True}
    return profile


def _dp_ep_decode(
    source: str, setup: str, ranks: int, batch: int, tokens_per_s_per_gpu: float,
    lengths: tuple[int, int], engine_args: dict[str, Any], part: Part,
    context: int = _CONTEXT, scheduling: dict[str, Any] = SYNC, **serving: int,
) -> Row:  # fmt: skip
    """DeepSeek-R1 decoding on `ranks` H200s at DP = EP, TP 1, `batch` requests a rank: a row
    at the mean decode step, batch / (output tokens/s per GPU)."""
    profile = _dp_ep_profile(ranks, lengths, engine_args, context, scheduling, **serving)
    step_ms = 1e3 * batch / tokens_per_s_per_gpu
    return Row(source, setup, "tpot", step_ms, profile, part, batch=batch)


def _decode(expert_parallel: int, tokens_per_s_per_gpu: float, part: Part) -> Row:
    setup = (
        f"{_SERVE}; EP {expert_parallel} ({expert_parallel // 8} nodes of 8), 2,000 in / 2,000 "
        f"out (mean), {BATCH_PER_RANK} concurrent requests per EP rank; "
        f"{tokens_per_s_per_gpu:,.0f} output tokens/s per GPU (read off the chart), as the mean "
        f"decode step of {BATCH_PER_RANK} sequences"
    )
    return _dp_ep_decode(WIDE_EP, setup, expert_parallel, BATCH_PER_RANK, tokens_per_s_per_gpu,
                         (2000, 2000), _ENGINE_ARGS, part)  # fmt: skip


# The prefill workers' engine argument (the manifest's VLLM_ALL2ALL_BACKEND).
_PREFILL_ARGS = {"all2all_backend": "deepep_high_throughput"}
# Requests a prefill row is planned as (see the module's docstring).
PREFILL_PROMPTS = 1000


def _prefill(expert_parallel: int, prompt_tokens_per_s_per_gpu: float, part: Part) -> Row:
    setup = (
        f"DeepSeek-R1-0528 FP8 on CoreWeave H200s (InfiniBand ConnectX-7), the prefill side of "
        f"P/D, DP+EP {expert_parallel} at TP 1 ({max(1, expert_parallel // 8)} nodes of 8), "
        f"DeepEP high-throughput all-to-all; 2,000 in / 1 out at an unbounded rate; "
        f"{prompt_tokens_per_s_per_gpu:,.0f} prompt tokens/s per GPU (read off the chart), as "
        f"the replica's total tokens/s for a burst of {PREFILL_PROMPTS:,} prompts"
    )
    profile = _dp_ep_profile(expert_parallel, (2000, 1), _PREFILL_ARGS)
    total = prompt_tokens_per_s_per_gpu * expert_parallel * 2001 / 2000
    return Row(WIDE_EP, setup, "total_tps", total, profile, part)


WIDE_EP_ROWS: list[Row] = [
    # In the decode chart's order.
    _decode(32, 2180, "fit"),
    _decode(72, 2069, "held"),
    _decode(96, 1970, "fit"),
    # Then the prefill chart's, in its order.
    _prefill(8, 6514, "held"),
    _prefill(16, 7011, "fit"),
    _prefill(32, 5095, "held"),
]


DP_AWARE = (
    "https://github.com/llm-d/llm-d/blob/05126b7ecd70fe8aa3af772dc34890fb765fd58f/guides/"
    "wide-ep-lws/experimental-dp-aware/README.md (Benchmarking Results; decode manifest "
    "manifests/modelserver/base/decode.yaml at 04291b76)"
)
WIDE_EP_GUIDE = (
    "https://github.com/llm-d/llm-d/blob/018994e8e622cc001b0f03dc66e72cc680a9b9da/guides/"
    "wide-ep/README-lws.md (Benchmarking Results; decode manifest modelserver/gpu/lws/vllm/base/"
    "decode.yaml at 28539d99)"
)
# 2,048 clients over the decode worker's 16 ranks.
EP16_BATCH_PER_RANK = 2048 // 16


def _ep16_decode(
    source: str, where: str, build: str, output_per_s: float, input_per_s: float,
    requests_per_s: float, engine_args: dict[str, Any], part: Part, **serving: int,
) -> Row:  # fmt: skip
    """A decode worker of DP 16 at EP 16 holding 128 requests a rank, from the run's totals."""
    lengths = (round(input_per_s / requests_per_s), round(output_per_s / requests_per_s))
    setup = (
        f"DeepSeek-R1-0528 FP8 on 32 H200s ({where}; {build}), P/D disaggregated, decode DP 16 + "
        f"EP 16 at TP 1 (2 nodes of 8); 2,048 concurrent requests, 2K in / 2K out; "
        f"{output_per_s:,.0f} output tokens/s over 16 decode GPUs at {requests_per_s} "
        f"requests/s, as the mean decode step of {EP16_BATCH_PER_RANK} sequences"
    )
    # Both guides' builds are vLLM 0.14 or later, which schedules asynchronously unless told not
    # to (calibration_row.ASYNC); neither manifest turns it off.
    return _dp_ep_decode(source, setup, 16, EP16_BATCH_PER_RANK, output_per_s / 16, lengths,
                         engine_args, part, scheduling=ASYNC, **serving)  # fmt: skip


_DP_AWARE_ARGS = {"all2all_backend": "deepep_low_latency"}
# llm-d-cuda v0.7.0's vLLM: its guide does not say; a third-party evaluation of llm-d v0.7.0
# lists "vLLM 0.19.1 (bundled in llm-d-cuda:v0.7.0)". Either way 0.14 or later.
_DP_AWARE_BUILD = "llm-d-cuda v0.7.0, vLLM 0.14 or later"
_GUIDE_ARGS = {"enable_dbo": True, "all2all_backend": "deepep_low_latency"}

WIDE_EP_ROWS += [
    # The DP-aware guide, in its order: CoreWeave's DP-supervisor column, then GKE's.
    _ep16_decode(DP_AWARE, "CoreWeave, InfiniBand", _DP_AWARE_BUILD, 27853, 29329, 14.33,
                 _DP_AWARE_ARGS, "fit", context=65536),
    _ep16_decode(DP_AWARE, "GKE, RoCE", _DP_AWARE_BUILD, 23246, 25106, 12.27, _DP_AWARE_ARGS,
                 "held", context=65536),
    _ep16_decode(WIDE_EP_GUIDE, "CoreWeave, InfiniBand", "llm-d's vLLM 0.23 build", 25176,
                 25122, 12.6, _GUIDE_ARGS, "fit", max_num_seqs=256, max_num_batched_tokens=256),
]  # fmt: skip
