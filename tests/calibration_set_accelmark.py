"""Calibration rows for the time to first token at concurrency 1, the regime issue 32 found
with two held rows: AccelMark's long-context runs of vLLM, one request at a time.

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
    return Row(ACCELMARK, setup, "prefill", ttft_ms, profile, part, fixed_prompts=True)


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
