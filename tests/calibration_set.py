"""The calibration set: published serving measurements the planner's estimates are judged by.

Every row is one published run: where it was read (`source`), its setup as published (model,
GPUs and layout, engine and version, workload lengths, concurrency), the metric and value it
reports, and which `part` it belongs to. The planner's efficiency constants were fitted on the
`fit` rows only; the `held` rows judge them. Nothing here is estimated: where a setup leaves a
serving default unstated, the row uses the default of the vLLM version it names (see VLLM_*).

Classes: dense decode and MoE decode (time per output token at a stated concurrency), TTFT
(time to first token at low concurrency, or engine-level prefill latency), saturation
(throughput with every request queued at once).

How the vLLM TTFT rows were measured (GPUStack's pages, each run's full output read): `vllm bench
serve --backend openai-chat` (the chat endpoint: template and tokenization count) over 100
ShareGPT prompts, closed loop at --max-concurrency c (a finished request is replaced at once),
prefix caching on by default: what requests share (the chat template's opening; for gpt-oss, the
harmony system message) comes from the cache, so a row's prompt is the dataset's length. The
rows take the mean TTFT, the statistic that matches a workload given by mean lengths; each row
notes the median of the same run. Its P99 inter-token latency at c >= 4 is the length of a step
that carries a new prompt (each such step stalls c - 1 streams: at c = 4, three of about 220
tokens per request, more than 1% of the samples). The NIM rows are TensorRT-LLM behind NVIDIA's
own server, not vLLM; the TensorRT-LLM rows are the engine alone, without a server.

What each source counts as the first token. `vllm bench serve`'s chat client stops the clock at
the first streamed chunk that carries `choices`, whatever its delta (role, reasoning or content:
vllm/benchmarks/lib/endpoint_request_func.py, async_request_openai_chat_completions), and
vLLM's chat server sends its first chunk, the one naming the assistant's role, when the
engine's first output for the request arrives, after the first token is sampled
(entrypoints/openai chat serving, chat_completion_stream_generator, first_iteration). A
reasoning model's thinking (Qwen3, DeepSeek-R1, gpt-oss's analysis channel) therefore does not
delay it, and none of these serve commands sets a reasoning parser: the rows are the time to
the first generated token through the HTTP server, chat template and tokenizer, what
serving.plan.speed.ttft_s estimates. The client starts the first c requests together (no request
rate under --max-concurrency c), so a row's mean also counts that opening wave queueing behind
itself (calibration_score.opening_wave_s), and sends one test request before the run, outside
its timing.
NIM's figures are GenAI-Perf's, which skips responses without content
(https://docs.nvidia.com/nim/benchmarking/llm/latest/metrics.html): at most one step later
than vLLM's definition, never earlier.
The ShareGPT rows' prompts spread around their mean like a chat dataset's
(serving.plan.speed.prompt_lengths); NIM's are GenAI-Perf's synthetic prompts, all of the stated
length (--synthetic-input-tokens-stddev defaults to 0: GenAI-Perf's README,
https://docs.nvidia.com/deeplearning/triton-inference-server/archives/triton-inference-server-2560/user-guide/docs/perf_analyzer/genai-perf/README.html),
so they are `fixed_prompts`. Where each row was read is in calibration_sources.
"""

from __future__ import annotations

from calibration_row import ASYNC, Row, _p
from calibration_set_accelmark import ACCELMARK_ROWS
from calibration_set_independent import INDEPENDENT_ROWS
from calibration_set_regimes import REGIME_ROWS, mean_tpot_rows
from calibration_set_wide_ep import WIDE_EP_ROWS
from calibration_sources import (
    ALL_AT_ONCE,
    BLOG,
    DSR1_H200,
    DSR1_H200_SHORT,
    DSR1_SHAREGPT,
    DSR1_SHAREGPT_100,
    LLAMA_2_70B,
    MEDIUM,
    NIM,
    OSS20_A100,
    OSS20_A100_VERY_LONG,
    OSS20_H100,
    OSS20_SHAREGPT_H100,
    OSS120_A100,
    OSS120_H100,
    OSS_A100,
    OSS_A100_TUNED,
    OSS_MEDIUM,
    OSS_SHAREGPT,
    OSS_SHAREGPT_100,
    Q8_H100,
    Q14_A100,
    Q14_H100,
    Q32_A100,
    Q32_A100_VERY_LONG,
    Q235_A100,
    Q235_A100_SHAREGPT,
    Q235_FP8_H100,
    Q235_FP8_LONG,
    Q235_FP8_MEDIUM,
    Q235_FP8_SHAREGPT_16K,
    Q235_FP8_SHAREGPT_TP4,
    Q235_FP8_SHAREGPT_TP4_EP,
    Q235_FP8_SHAREGPT_TP8_EP,
    Q235_FP8_VERY_LONG,
    Q235_H100,
    Q235_LONG,
    Q235_MEDIUM,
    Q235_SHAREGPT,
    Q235_VERY_LONG,
    QWEN3_14B_H100_SHORT,
    QWEN_SHAREGPT,
    QWEN_SHAREGPT_100,
    TRTLLM,
    VERY_LONG,
    VLLM_0_11_QWEN3_TEMPLATE_PARSE_S,
    VLLM_NIGHTLY,
    A,
    H,
    _gpustack,
)

ROWS: list[Row] = [
    # --- dense decode ------------------------------------------------------------------------
    Row(VLLM_NIGHTLY, "Llama-3.1-8B, 1xH100, vLLM 0.6 (V0)", "tpot", 997.5 / 128,
        _p("llama-3.1-8b", "h100-80gb", workload=(32, 128)), "fit", batch=8, engine="v0"),
    Row(VLLM_NIGHTLY, "Llama-3.3-70B, 4xH100 TP4, vLLM 0.6 (V0)", "tpot", 2444.5 / 128,
        _p("llama-3.3-70b", "h100-80gb", 4, workload=(32, 128)), "held", batch=8, engine="v0"),
    Row(VLLM_NIGHTLY, "Llama-3.1-8B, 1xH200, vLLM 0.6 (V0)", "tpot", 833.4 / 128,
        _p("llama-3.1-8b", "h200-141gb", workload=(32, 128)), "held", batch=8, engine="v0"),
    Row(VLLM_NIGHTLY, "Llama-3.3-70B, 4xH200 TP4, vLLM 0.6 (V0)", "tpot", 2077.5 / 128,
        _p("llama-3.3-70b", "h200-141gb", 4, workload=(32, 128)), "fit", batch=8, engine="v0"),
    Row(VLLM_NIGHTLY, "Llama-3.1-8B, 1xA100-80GB, vLLM 0.6 (V0)", "tpot", 1579.3 / 128,
        _p("llama-3.1-8b", "a100-80gb", workload=(32, 128)), "fit", batch=8, engine="v0"),
    Row(VLLM_NIGHTLY, "Llama-3.3-70B, 4xA100-80GB TP4, vLLM 0.6 (V0)", "tpot", 3990.6 / 128,
        _p("llama-3.3-70b", "a100-80gb", 4, workload=(32, 128)), "held", batch=8, engine="v0"),
    Row(NIM, "Llama-3.3-70B FP8, 2xH100 TP2, 500 in / 2000 out, concurrency 1", "tpot", 18.91,
        _p("llama-3.3-70b", "h100-80gb", 2, workload=(500, 2000), quantization="fp8",
           max_model_len=8192), "held"),
    Row(BLOG, "Llama-3.1-8B BF16, 1xA100-40GB, vLLM 0.23.0, 1024 in / 128 out, concurrency 1",
        "tpot", 1000 / 75,
        _p("llama-3.1-8b", "a100-40gb", workload=(1024, 128), **A, **ASYNC), "fit"),
    _gpustack(Q8_H100, "concurrency 1", "tpot", 7.28,
              _p("qwen3-8b", "h100-80gb", workload=QWEN_SHAREGPT_100), "held", 1),
    _gpustack(Q8_H100, "concurrency 2", "tpot", 7.37,
              _p("qwen3-8b", "h100-80gb", workload=QWEN_SHAREGPT_100), "fit", 2),
    _gpustack(Q8_H100, "concurrency 4", "tpot", 7.38,
              _p("qwen3-8b", "h100-80gb", workload=QWEN_SHAREGPT_100), "held", 4),
    _gpustack(Q8_H100, "concurrency 8", "tpot", 7.71,
              _p("qwen3-8b", "h100-80gb", workload=QWEN_SHAREGPT_100), "fit", 8),
    # --- MoE decode --------------------------------------------------------------------------
    _gpustack(OSS120_H100, "TP1 --max-model-len 32768, ShareGPT concurrency 4", "tpot", 8.31,
              _p("gpt-oss-120b", "h100-80gb", workload=OSS_SHAREGPT_100, max_model_len=32768),
              "fit", 4),
    _gpustack(OSS120_H100, "TP2 --async-scheduling, ShareGPT concurrency 4", "tpot", 5.75,
              _p("gpt-oss-120b", "h100-80gb", 2, workload=OSS_SHAREGPT_100, **ASYNC), "held",
              4),
    _gpustack(OSS120_A100, "TP1 --max-model-len 32768, ShareGPT concurrency 4", "tpot", 11.67,
              _p("gpt-oss-120b", "a100-80gb", workload=OSS_SHAREGPT_100, **OSS_A100),
              "held", 4),
    _gpustack(OSS120_A100, "TP1 --async-scheduling --max-num-batched-tokens 4096, ShareGPT "
              "concurrency 4", "tpot", 11.03,
              _p("gpt-oss-120b", "a100-80gb", workload=OSS_SHAREGPT_100,
                 **OSS_A100_TUNED), "fit", 4),
    _gpustack(DSR1_H200, "`vllm serve deepseek-ai/DeepSeek-R1-0528 -tp 8`, ShareGPT "
              "concurrency 4", "tpot", 19.36,
              _p("deepseek-v3", "h200-141gb", 8, workload=DSR1_SHAREGPT_100, max_model_len=32768),
              "held", 4),
    # --- time to first token -----------------------------------------------------------------
    Row(NIM, "Llama-3.3-70B FP8, 2xH100 TP2, 500 in, concurrency 1", "ttft", 47.77,
        _p("llama-3.3-70b", "h100-80gb", 2, workload=(500, 2000), quantization="fp8",
           max_model_len=8192), "held", fixed_prompts=True),
    Row(NIM, "Llama-3.3-70B FP8, 2xH100 TP2, 5000 in, concurrency 1", "ttft", 406.77,
        _p("llama-3.3-70b", "h100-80gb", 2, workload=(5000, 500), quantization="fp8",
           max_model_len=8192), "fit", fixed_prompts=True),
    Row(TRTLLM, "4xA100 FP16 TP4, 2048 input tokens, batch 1", "prefill", 377,
        _p(LLAMA_2_70B, "a100-80gb", 4, workload=(2048, 1)), "fit"),
    Row(TRTLLM, "4xH100 FP8 TP4, 2048 input tokens, batch 1", "prefill", 109,
        _p(LLAMA_2_70B, "h100-80gb", 4, workload=(2048, 1), quantization="fp8"), "held"),
    _gpustack(Q8_H100, "concurrency 1; mean TTFT (median 60.38 ms, P99 ITL 8.17 ms)", "ttft",
              59.01,
              _p("qwen3-8b", "h100-80gb", workload=QWEN_SHAREGPT_100), "fit",
              retired_frontend_s=VLLM_0_11_QWEN3_TEMPLATE_PARSE_S,
              serial_frontend_s=QWEN3_14B_H100_SHORT.serial_s),
    _gpustack(Q8_H100, "concurrency 4; mean TTFT (median 60.26 ms, P99 ITL 40.98 ms)", "ttft",
              64.00,
              _p("qwen3-8b", "h100-80gb", workload=QWEN_SHAREGPT_100), "held", 4,
              retired_frontend_s=VLLM_0_11_QWEN3_TEMPLATE_PARSE_S,
              serial_frontend_s=QWEN3_14B_H100_SHORT.serial_s),
    _gpustack(Q8_H100, "concurrency 8; mean TTFT (median 60.77 ms, P99 ITL 45.48 ms)", "ttft",
              74.57,
              _p("qwen3-8b", "h100-80gb", workload=QWEN_SHAREGPT_100), "held", 8,
              retired_frontend_s=VLLM_0_11_QWEN3_TEMPLATE_PARSE_S,
              serial_frontend_s=QWEN3_14B_H100_SHORT.serial_s),
    _gpustack(OSS120_H100, "TP1 --max-model-len 32768, ShareGPT 100 prompts, concurrency 4; "
              "mean TTFT (median 47.49 ms, P99 ITL 23.32 ms)", "ttft", 49.00,
              _p("gpt-oss-120b", "h100-80gb", workload=OSS_SHAREGPT_100, max_model_len=32768),
              "held", 4),
    _gpustack(OSS120_H100, "TP2 --async-scheduling, ShareGPT 100 prompts, concurrency 4; mean "
              "TTFT (median 36.68 ms, P99 ITL 23.43 ms)", "ttft", 37.51,
              _p("gpt-oss-120b", "h100-80gb", 2, workload=OSS_SHAREGPT_100, **ASYNC), "fit",
              4),
    _gpustack(OSS120_A100, "TP1 --max-model-len 32768, ShareGPT 100 prompts, concurrency 4; "
              "mean TTFT (median 61.55 ms, P99 ITL 38.75 ms)", "ttft", 61.91,
              _p("gpt-oss-120b", "a100-80gb", workload=OSS_SHAREGPT_100, **OSS_A100),
              "fit", 4),
    _gpustack(OSS120_A100, "TP1 --async-scheduling --max-num-batched-tokens 4096, ShareGPT "
              "100 prompts, concurrency 4; mean TTFT (median 70.23 ms, P99 ITL 36.80 ms)", "ttft",
              71.15,
              _p("gpt-oss-120b", "a100-80gb", workload=OSS_SHAREGPT_100,
                 **OSS_A100_TUNED), "held", 4),
    _gpustack(DSR1_H200, "`-tp 8`, ShareGPT 100 prompts, concurrency 4; mean TTFT (median "
              "117.53 ms, P99 ITL 48.61 ms)", "ttft", 123.30,
              _p("deepseek-v3", "h200-141gb", 8, workload=DSR1_SHAREGPT_100, max_model_len=32768),
              "held", 4, serial_frontend_s=DSR1_H200_SHORT.serial_s),
    # --- saturation: every request queued at once ---------------------------------------------
    _gpustack(Q14_H100, f"`vllm serve Qwen/Qwen3-14B`, ShareGPT 1,000 prompts, {ALL_AT_ONCE}",
              "output_tps", 3173.92,
              _p("qwen3-14b", "h100-80gb", workload=QWEN_SHAREGPT, max_model_len=40960, **H),
              "fit"),
    _gpustack(Q14_A100, f"`vllm serve Qwen/Qwen3-14B`, ShareGPT 1,000 prompts, {ALL_AT_ONCE}",
              "output_tps", 1887.31,
              _p("qwen3-14b", "a100-80gb", workload=QWEN_SHAREGPT, max_model_len=40960, **A),
              "held"),
    _gpustack(Q32_A100, f"--max-model-len 32768, ShareGPT 1,000 prompts, {ALL_AT_ONCE}",
              "output_tps", 832.43,
              _p("qwen3-32b", "a100-80gb", workload=QWEN_SHAREGPT, max_model_len=32768, **A),
              "fit"),
    _gpustack(OSS120_H100, f"TP1 --max-model-len 32768, ShareGPT 1,000 prompts, {ALL_AT_ONCE}",
              "output_tps", 2901.05,
              _p("gpt-oss-120b", "h100-80gb", workload=OSS_SHAREGPT, max_model_len=32768, **H),
              "held"),
    _gpustack(OSS120_H100, f"TP2 --async-scheduling, ShareGPT 1,000 prompts, {ALL_AT_ONCE}",
              "output_tps", 7648.67,
              _p("gpt-oss-120b", "h100-80gb", 2, workload=OSS_SHAREGPT, max_model_len=32768, **H,
                 **ASYNC), "fit"),
    _gpustack(OSS120_H100, f"TP4 --async-scheduling, ShareGPT 1,000 prompts, {ALL_AT_ONCE}",
              "output_tps", 11327.22,
              _p("gpt-oss-120b", "h100-80gb", 4, workload=OSS_SHAREGPT, max_model_len=32768, **H,
                 **ASYNC), "held"),
    _gpustack(OSS120_A100, f"TP1 --max-model-len 32768, ShareGPT 1,000 prompts, {ALL_AT_ONCE}",
              "output_tps", 2276.40,
              _p("gpt-oss-120b", "a100-80gb", workload=OSS_SHAREGPT, **OSS_A100),
              "fit"),
    _gpustack(OSS120_A100, f"TP2 --async-scheduling, ShareGPT 1,000 prompts, {ALL_AT_ONCE}",
              "output_tps", 3765.02,
              _p("gpt-oss-120b", "a100-80gb", 2, workload=OSS_SHAREGPT, **OSS_A100, **ASYNC),
              "held"),
    _gpustack(OSS20_H100, f"`vllm serve openai/gpt-oss-20b`, ShareGPT 1,000 prompts, "
              f"{ALL_AT_ONCE}", "output_tps", 7817.03,
              _p("gpt-oss-20b", "h100-80gb", workload=OSS20_SHAREGPT_H100, max_model_len=131072,
                 **H),
              "held"),
    _gpustack(OSS20_A100, f"`vllm serve openai/gpt-oss-20b`, ShareGPT 1,000 prompts, "
              f"{ALL_AT_ONCE}", "output_tps", 4620.12,
              _p("gpt-oss-20b", "a100-80gb", workload=OSS_SHAREGPT, max_model_len=131072, **A),
              "fit"),
    _gpustack(Q235_H100, f"`-tp 8`, ShareGPT 1,000 prompts (984 served), {ALL_AT_ONCE}",
              "output_tps", 4015.36,
              _p("qwen3-235b-a22b", "h100-80gb", 8, workload=Q235_SHAREGPT, max_model_len=40960,
                 **H), "held"),
    _gpustack(Q235_H100, f"`-tp 8`, random 4,000 in / 200 out, 500 prompts, {ALL_AT_ONCE}",
              "total_tps", 21113.53,
              _p("qwen3-235b-a22b", "h100-80gb", 8, workload=Q235_LONG, max_model_len=40960, **H),
              "fit"),
    # block-scaled FP8 MoE (DeepSeek-V3's checkpoint format) as vLLM 0.11 serves it
    _gpustack(Q235_FP8_H100, f"`-tp 4`, ShareGPT 1,000 prompts (984 served), {ALL_AT_ONCE}",
              "output_tps", 3592.57,
              _p("qwen3-235b-a22b", "h100-80gb", 4, workload=Q235_FP8_SHAREGPT_TP4,
                 quantization="fp8", max_model_len=40960, **H), "fit"),
    _gpustack(Q235_FP8_H100, f"`-tp 4 --enable-expert-parallel`, ShareGPT 1,000 prompts (984 "
              f"served), {ALL_AT_ONCE}", "output_tps", 3376.99,
              _p("qwen3-235b-a22b", "h100-80gb", 4, workload=Q235_FP8_SHAREGPT_TP4_EP,
                 quantization="fp8", max_model_len=40960, **H) | {"parallelism": {"tensor": 4,
                 "expert": True}}, "fit"),
    _gpustack(Q235_FP8_H100, f"`-tp 8 --enable-expert-parallel`, ShareGPT 1,000 prompts (984 "
              f"served), {ALL_AT_ONCE}", "output_tps", 3856.59,
              _p("qwen3-235b-a22b", "h100-80gb", 8, workload=Q235_FP8_SHAREGPT_TP8_EP,
                 quantization="fp8", max_model_len=40960, **H) | {"parallelism": {"tensor": 8,
                 "expert": True}}, "fit"),
    _gpustack(Q235_FP8_H100, f"`-tp 4 --max-num-batched-tokens 16384`, ShareGPT 1,000 prompts "
              f"(984 served), {ALL_AT_ONCE}", "output_tps", 3700.75,
              _p("qwen3-235b-a22b", "h100-80gb", 4, workload=Q235_FP8_SHAREGPT_16K,
                 quantization="fp8", max_model_len=40960, max_num_seqs=1024,
                 max_num_batched_tokens=16384), "fit"),
    _gpustack(Q235_FP8_H100, f"`-tp 4 --max-num-batched-tokens 16384`, random 2,000 in / 100 "
              f"out, 500 prompts, {ALL_AT_ONCE}", "total_tps", 18950.04,
              _p("qwen3-235b-a22b", "h100-80gb", 4, workload=Q235_FP8_MEDIUM, quantization="fp8",
                 max_model_len=40960, max_num_seqs=1024, max_num_batched_tokens=16384), "fit"),
    _gpustack(Q235_FP8_H100, f"`-tp 4 --max-num-batched-tokens 16384`, random 4,000 in / 200 "
              f"out, 500 prompts, {ALL_AT_ONCE}", "total_tps", 16478.79,
              _p("qwen3-235b-a22b", "h100-80gb", 4, workload=Q235_FP8_LONG, quantization="fp8",
                 max_model_len=40960, max_num_seqs=1024, max_num_batched_tokens=16384), "fit"),
    _gpustack(Q235_FP8_H100, f"`-tp 4 --max-num-batched-tokens 16384`, random 32,000 in / 100 "
              f"out, 100 prompts, {ALL_AT_ONCE}", "total_tps", 15366.32,
              _p("qwen3-235b-a22b", "h100-80gb", 4, workload=Q235_FP8_VERY_LONG,
                 quantization="fp8", max_model_len=40960, max_num_seqs=1024,
                 max_num_batched_tokens=16384), "fit"),
    _gpustack(Q235_A100, f"`-tp 8`, ShareGPT 1,000 prompts, {ALL_AT_ONCE}", "output_tps",
              1798.14,
              _p("qwen3-235b-a22b", "a100-80gb", 8, workload=Q235_A100_SHAREGPT,
                 max_model_len=40960,
                 **A), "fit"),
    _gpustack(DSR1_H200, f"`-tp 8`, ShareGPT 1,000 prompts, {ALL_AT_ONCE}", "output_tps",
              2621.05,
              _p("deepseek-v3", "h200-141gb", 8, workload=DSR1_SHAREGPT, max_model_len=32768,
                 **H), "held"),
    _gpustack(Q14_H100, f"random 2,000 in / 100 out, 500 prompts, {ALL_AT_ONCE}", "total_tps",
              10597.19,
              _p("qwen3-14b", "h100-80gb", workload=MEDIUM, max_model_len=40960, **H), "fit"),
    _gpustack(Q14_A100, f"random 2,000 in / 100 out, 500 prompts, {ALL_AT_ONCE}", "total_tps",
              5967.13,
              _p("qwen3-14b", "a100-80gb", workload=MEDIUM, max_model_len=40960, **A), "held"),
    _gpustack(Q32_A100, f"`vllm serve Qwen/Qwen3-32B`, random 2,000 in / 100 out, 500 prompts, "
              f"{ALL_AT_ONCE}", "total_tps", 2521.38,
              _p("qwen3-32b", "a100-80gb", workload=MEDIUM, max_model_len=40960, **A), "held"),
    _gpustack(OSS120_H100, f"TP1 --max-model-len 32768, random 2,000 in / 100 out, 500 "
              f"prompts, {ALL_AT_ONCE}", "total_tps", 14385.69,
              _p("gpt-oss-120b", "h100-80gb", workload=OSS_MEDIUM, max_model_len=32768, **H),
              "fit"),
    _gpustack(Q235_H100, f"`-tp 8`, random 2,000 in / 100 out, 500 prompts, {ALL_AT_ONCE}",
              "total_tps", 23858.69,
              _p("qwen3-235b-a22b", "h100-80gb", 8, workload=Q235_MEDIUM, max_model_len=40960,
                 **H),
              "held"),
    _gpustack(DSR1_H200, f"`-tp 8`, random 2,000 in / 100 out, 500 prompts, {ALL_AT_ONCE}",
              "total_tps", 17690.89,
              _p("deepseek-v3", "h200-141gb", 8, workload=MEDIUM, max_model_len=32768, **H),
              "held"),
    # long prompts, where causal attention is a large part of prefill
    _gpustack(Q14_H100, f"random 32,000 in / 100 out, 100 prompts, {ALL_AT_ONCE}", "total_tps",
              8298.56,
              _p("qwen3-14b", "h100-80gb", workload=VERY_LONG, max_model_len=40960, **H), "fit"),
    _gpustack(Q14_A100, f"random 32,000 in / 100 out, 100 prompts, {ALL_AT_ONCE}", "total_tps",
              4430.14,
              _p("qwen3-14b", "a100-80gb", workload=VERY_LONG, max_model_len=40960, **A), "held"),
    _gpustack(OSS120_H100, f"TP1 --max-model-len 32768, random 32,000 in / 100 out, 100 "
              f"prompts, {ALL_AT_ONCE}", "total_tps", 16136.57,
              _p("gpt-oss-120b", "h100-80gb", workload=VERY_LONG, max_model_len=32768, **H),
              "held"),
    _gpustack(Q235_H100, f"`-tp 8`, random 32,000 in / 100 out, 100 prompts, {ALL_AT_ONCE}",
              "total_tps", 22657.51,
              _p("qwen3-235b-a22b", "h100-80gb", 8, workload=Q235_VERY_LONG, max_model_len=40960,
                 **H), "fit"),
    _gpustack(DSR1_H200, f"`-tp 8`, random 32,000 in / 100 out, 100 prompts, {ALL_AT_ONCE}",
              "total_tps", 15514.57,
              _p("deepseek-v3", "h200-141gb", 8, workload=VERY_LONG, max_model_len=32768, **H),
              "held"),
    _gpustack(OSS20_A100, f"random 32,000 in / 100 out, 100 prompts, {ALL_AT_ONCE}",
              "total_tps", 7280.33,
              _p("gpt-oss-20b", "a100-80gb", workload=OSS20_A100_VERY_LONG, max_model_len=131072,
                 **A),
              "fit"),
    _gpustack(Q32_A100, f"`vllm serve Qwen/Qwen3-32B`, random 32,000 in / 100 out, 100 "
              f"prompts, {ALL_AT_ONCE}", "total_tps", 1798.45,
              _p("qwen3-32b", "a100-80gb", workload=Q32_A100_VERY_LONG, max_model_len=40960, **A),
              "held"),
]  # fmt: skip
# The rows gathered for the regimes issue 32 names (saturated serving with a full KV cache, large
# MoE models on A100s, MLA at TP8), split by their own rule (calibration_set_regimes).
ROWS += REGIME_ROWS
# Rows from other publishers, split by the same rule (calibration_set_independent).
ROWS += INDEPENDENT_ROWS
# DP+EP decode across nodes, split by the same rule (calibration_set_wide_ep).
ROWS += WIDE_EP_ROWS
# Long prompts one at a time, engine-level, split by the same rule (calibration_set_accelmark).
ROWS += ACCELMARK_ROWS
# The mean TPOT of the random 2K and 4K runs, each in its run's part.
ROWS += mean_tpot_rows(ROWS)
