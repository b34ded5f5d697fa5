"""Calibration rows for the time to first token at concurrency 1, the regime issue 32 found
with two held rows: AccelMark's long-context runs of vLLM, one request at a time; and for
saturation on eight GPUs: AccelMark's offline runs of Llama-3-70B and Mixtral-8x7B at TP 8.

Where they were read. AccelMark (github.com/FreedomIntelligence/AccelMark, commit 5797fc4)
publishes each verified run as results/verified/<run>/<scenario>/result.json, with the suite it
ran (suites/<suite>/suite.json), the runner that ran it (runners/<runner>/runner.py) and the load
generator (loadgen/loadgen.py). Suite D is Llama-3.1-8B-Instruct in BF16 on one GPU (TP 1) with
max_model_len 30,208, over the long-context ShareGPT set (datasets/sharegpt_longctx_v1), whose
prompts the suite states at 28,245 / 28,650 / 29,210 tokens (p25 / p50 / p75), generation capped
at 256 tokens, greedy. Its interactive scenario sends the set's first 100 prompts one at a time,
each after the last has finished (_run_interactive_async), in 2 runs with no warm-up pass
(interactive_warmup_runs 0), and reports the median and tails of the time to first token over
the 200 requests. The runner nvidia_vllm_47f5d58e runs vLLM 0.7.3 in process:
AsyncLLMEngine.from_engine_args with the model, dtype, tensor_parallel_size, enforce_eager off,
gpu_memory_utilization and max_model_len, no scheduler setting; each prompt passed as text
through the tokenizer's chat template, the first token timed at the first output of
engine.generate that carries a token (inference_fn_streaming).

What a row is. The median time to first token of the run, as the engine-level prefill of a
prompt of the set's median length (`prefill`, like TensorRT-LLM's batch-1 rows): one request at
a time, a prompt's time to first token grows with its length alone, so the median request's is
that of the median prompt. No HTTP server stands in front of the engine, so the planner's
server floor (fitted.TTFT_FLOOR_S) is not added; the chat template's header adds some dozens of
tokens to prompts of 28,650 (under 0.2%), and the first 100 prompts' median is the set's to
within its quartiles (±2%). The profile is vLLM 0.7's V0 engine as the runner starts it
(vllm/engine/arg_utils.py of that release, EngineArgs.__post_init__ and create_engine_config):
max_num_seqs 256, no prefix caching, and no chunked prefill below a max_model_len of 32K, so the
whole prompt in one step (max_num_batched_tokens = max_model_len); synchronous scheduling.
The runner sets no VLLM_USE_V1, with which vLLM 0.7 would have run its V1 engine instead:
each row is `engine="v0"`, its steps paying V0's host time (fitted.V0_STEP_OVERHEAD_S) besides
the step cost the planner gives V1 (calibration_score.v0_host_time).

What the rows leave out. The same runs' median time per output token: at batch 1 vLLM 0.7's
decode step is paced by its host's per-step work, which the runs do not state and which differs
between their machines (the two A100 runs of the same vLLM decode at 17.96 and 30.57 ms a token
while their prefills agree within 1%). The other suites' interactive runs (A, B, F, G: prompts
of 95 to 280 tokens at the median) take tens of milliseconds, of which the GPU's prefill is a
small part: there the runs time their hosts (Qwen2.5-0.5B's median time to first token is
11.5 ms on the H100 machine and 36.0 ms on the H200 one, same vLLM). The suite D run on an
A100 80GB with runner nvidia_vllm020_0f6c56e4 (vLLM 0.20.1): vLLM 0.20's defaults for an engine
started in process (usage context ENGINE_CONTEXT: its token budget, and whether it schedules
asynchronously) are in no source read here. Runs on GPUs the catalog does not hold (A800, H20,
RTX, L4, V100, T4) are not rows.

The split follows calibration_set_regimes' rule, by runs, in the order the results folder lists
them (results/verified/, by name): fit, held, fit, held
(tests/serving/plan/test_published_measurements.py checks it).

The offline runs on eight GPUs (a page of their own, ACCELMARK_OFFLINE; the same split rule).
Suites B and G serve Meta-Llama-3-70B-Instruct and Mixtral-8x7B-Instruct-v0.1 in BF16 at TP 8
with max_model_len 4,096 over the standard ShareGPT set (datasets/sharegpt_standard_v1),
generation capped at 512 tokens (output_tokens_max, which runners/benchmark_runner.py passes on
as the runner's SamplingParams.max_tokens), greedy. The offline scenario (loadgen.py,
_run_offline) hands the set's first 100 prompts (request_count) to the runner's sync
`LLM.generate` at once, after a warm-up pass, 3 runs, and reports the median output tokens per
second; it does so at each of the suite's "client concurrency" levels, which set nothing (the
runner sends all 100 whatever the level: the A100 runs read the same to 0.2% at every level), so
a row takes the median of the levels' figures. The runner's LLM class is vLLM 0.7.3's V0 engine
with max_num_seqs 512 (the runner's default), CUDA graphs on, no chunked prefill below a
max_model_len of 32K and so a token budget of max_model_len, no prefix caching. The requests'
mean lengths come from the runs' own totals: the A100 runs also publish input-plus-output tokens
per second (throughput_tokens_per_sec_total), so input tokens a request = (total - output) x
elapsed / 100 and output tokens = output x elapsed / 100 (elapsed_seconds_median, at the median
level); the H200 runs publish no total, and take the A100 run's input length (the same prompts
through the same tokenizer and chat template) and their own output length (greedy decoding on
other GPUs ends some outputs elsewhere). Means of 336 to 365 under a cap of 512 put a good share
of the outputs at the cap (workload.max_output_tokens). Llama-3-70B is planned as llama-3.3-70b,
whose config.json has the same shapes (80 layers, hidden 8,192, 64 query and 8 KV heads, FFN
28,672, vocabulary 128,256, untied). Left out: these runs' interactive time per output token
(one request at a time, paced by the host's per-step work, as suite D's), their online runs
(Poisson arrivals: the running batch is not stated, and the figures are medians), the sustained
runs (throughput of a closed loop of 4 or 8, a metric no row has), suite E (Llama-3-8B at TP 1
to 8 over 150 prompts, runs of 6 to 18 s), and the runs on GPUs the catalog does not hold (A800,
H20, RTX, V100).
"""

from __future__ import annotations

from calibration_row import Part, Row, _p

ACCELMARK = (
    "https://github.com/FreedomIntelligence/AccelMark (commit 5797fc4): "
    "results/verified/<run>/interactive/result.json, suites/suite_D/suite.json, "
    "runners/nvidia_vllm_47f5d58e/runner.py, loadgen/loadgen.py"
)
# suite_D's prompts at their median (request_distribution.input_tokens_p50), and its cap.
_PROMPT = 28650
_OUTPUT = 256
_CONTEXT = 30208
# vLLM 0.7's V0 engine started from AsyncEngineArgs with max_model_len 30,208 and nothing else.
_V0 = {"max_num_seqs": 256, "max_num_batched_tokens": _CONTEXT, "prefix_caching": False}


def _interactive(run: str, accelerator: str, ttft_ms: float, p90_ms: float, part: Part) -> Row:
    profile = _p("llama-3.1-8b", accelerator, 1, workload=(_PROMPT, _OUTPUT),
                 max_model_len=_CONTEXT, **_V0)  # fmt: skip
    setup = (
        f"run {run}: Llama-3.1-8B-Instruct BF16, 1x{accelerator} TP1, vLLM 0.7.3 (V0) "
        f"AsyncLLMEngine in process; suite D interactive, the first 100 long-context ShareGPT "
        f"prompts (p50 {_PROMPT:,} tokens) one at a time, 2 runs, up to {_OUTPUT} output tokens; "
        f"median TTFT (p90 {p90_ms:,.2f} ms)"
    )
    return Row(ACCELMARK, setup, "prefill", ttft_ms, profile, part, fixed_prompts=True,
               engine="v0")  # fmt: skip


ACCELMARK_ROWS: list[Row] = [
    # In the order results/verified/ lists the runs.
    _interactive("nvidia_a100_sxm4_40gbx1_suite_D_nvidia_vllm_47f5d58e_8e114cbe", "a100-40gb",
                 2822.72, 2934.14, "fit"),
    _interactive("nvidia_a100_sxm4_80gbx1_suite_D_nvidia_vllm_47f5d58e_7bef8eef", "a100-80gb",
                 2838.69, 2954.39, "held"),
    _interactive("nvidia_h100_80gb_hbm3x1_suite_D_nvidia_vllm_47f5d58e_02748da4", "h100-80gb",
                 1076.72, 1126.57, "fit"),
    _interactive("nvidia_h200x1_suite_D_nvidia_vllm_47f5d58e_62a36028", "h200-141gb",
                 1165.86, 1218.3, "held"),
]  # fmt: skip


ACCELMARK_OFFLINE = (
    "https://github.com/FreedomIntelligence/AccelMark (commit 5797fc4): "
    "results/verified/<run>/offline/result.json, suites/suite_B/suite.json, "
    "suites/suite_G/suite.json, runners/nvidia_vllm_47f5d58e/runner.py, "
    "runners/benchmark_runner.py, loadgen/loadgen.py"
)
_STANDARD_CONTEXT = 4096
_CAP = 512
# vLLM 0.7's V0 engine as the runner's LLM() starts it: max_num_seqs 512, no chunked prefill.
_V0_OFFLINE = {
    "max_num_seqs": 512,
    "max_num_batched_tokens": _STANDARD_CONTEXT,
    "prefix_caching": False,
}
_MODELS = {"B": ("llama-3.3-70b", "Meta-Llama-3-70B-Instruct"),
           "G": ("mixtral-8x7b", "Mixtral-8x7B-Instruct-v0.1")}  # fmt: skip


def _offline(
    run: str, accelerator: str, suite: str, levels: tuple[float, float, float],
    lengths: tuple[int, int], part: Part,
) -> Row:  # fmt: skip
    arch, model = _MODELS[suite]
    profile = _p(arch, accelerator, 8, max_model_len=_STANDARD_CONTEXT, **_V0_OFFLINE)
    profile["workload"] = {"input_tokens": lengths[0], "output_tokens": lengths[1],
                           "max_output_tokens": _CAP}  # fmt: skip
    setup = (
        f"run {run}: {model} BF16, 8x{accelerator} TP8, vLLM 0.7.3 (V0) LLM.generate in "
        f"process; suite {suite} offline, the first 100 prompts of the standard ShareGPT set "
        f"at once (mean {lengths[0]} in, {lengths[1]} out, up to {_CAP}), 3 runs after a "
        f"warm-up; output tokens/s, the median of the levels' "
        f"{', '.join(f'{v:,.2f}' for v in levels)}"
    )
    return Row(ACCELMARK_OFFLINE, setup, "output_tps", sorted(levels)[1], profile, part,
               engine="v0")  # fmt: skip


ACCELMARK_ROWS += [
    # In the order results/verified/ lists the runs. Lengths: A100 suite B, (2,973.19 -
    # 1,704.46) x 20.2 / 100 = 256 in and 1,704.46 x 20.2 / 100 = 344 out; suite G, (6,016.78
    # - 3,215.89) x 10.9 / 100 = 305 in and 3,215.89 x 10.9 / 100 = 351 out; H200 suite B,
    # 3,406.6 x 10.7 / 100 = 365 out, suite G, 5,332.7 x 6.3 / 100 = 336 out.
    _offline("nvidia_a100_sxm4_40gbx8_suite_B_nvidia_vllm_47f5d58e_14410aea", "a100-40gb", "B",
             (1704.26, 1704.71, 1704.46), (256, 344), "fit"),
    _offline("nvidia_a100_sxm4_40gbx8_suite_G_nvidia_vllm_47f5d58e_08de2dc2", "a100-40gb", "G",
             (3217.83, 3213.92, 3215.89), (305, 351), "held"),
    _offline("nvidia_h200x8_suite_B_nvidia_vllm_47f5d58e_b727568e", "h200-141gb", "B",
             (3215.83, 3406.6, 3553.46), (256, 365), "fit"),
    _offline("nvidia_h200x8_suite_G_nvidia_vllm_47f5d58e_7f7a270e", "h200-141gb", "G",
             (4467.22, 5334.28, 5332.7), (305, 336), "held"),
]  # fmt: skip
