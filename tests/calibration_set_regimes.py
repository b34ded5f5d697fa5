"""Calibration rows gathered for the regimes the planner missed on runs it was not fitted to
(issue 32): saturated serving of dense models that fill their KV cache (Qwen3-32B on one H100,
where prompts of 4K tokens leave room for a handful of sequences), large MoE models on A100s at
TP8 and TP4, and MLA at TP8 on Hopper.

Every row is a published `vllm bench serve` run read from its page (the whole benchmark output,
not the summary table), with its setup as published: the serve command, the dataset, the number
of prompts, all sent at once (no --request-rate, so every request is queued at the start). Mean
lengths are the published totals over the successful requests. Where a page leaves a serving
default unstated the row takes vLLM 0.11's (calibration_row.VLLM_*), as calibration_set's rows do.

Besides throughput, every random 2,000/100 and 4,000/200 run in the set (these and
calibration_set's) gives its mean time per output token (`burst_tpot`, mean_tpot_rows): the
inter-token latency at saturation, where the prompts replacing finished requests share every
decode step (serving.plan.speed.mixed). The ShareGPT and 32,000-token runs do not: ShareGPT's
outputs spread so widely that a mean over requests is a mean over their lengths, and
32,000-token prompts fill whole steps, which alternate with steps that only decode, a pattern
the steady mixed step does not describe. The TPOT of 5 runs of calibration_set's pages
(Qwen3-235B-A22B BF16 and FP8 on H100s, gpt-oss-120b on one H100) was added after the first
refit, for the rule to hold for every such run; each takes its run's part.

GLM-4.6 (zai-org, 355B parameters, 32B active, 160 experts of which 8 a token, GQA) is a model
the planner had never been checked on, read from its config.json (tests/fixtures/hf_configs,
GLM-4.5's, whose architecture GLM-4.6 keeps with a longer context, max_position_embeddings
202,752) by the importer as a user's model would be. GPUStack's pages give its vLLM 0.11 baseline
runs at TP8: BF16 on 8xH200 (ShareGPT, random 32K, 4K and 2K, all at once) and FP8 on 8xA100
(ShareGPT at TP8, with expert parallelism and at three token budgets). Left out: each page's
short-prompt run (the server's serial work, FRONTEND_RUNS' regime), the H200 page's ShareGPT run
at concurrency 4 (a TPOT and a TTFT of one run, where the split rule below takes one part per
figure), and the H100 page's only vLLM run, GLM-4.6-FP8 at TP8 with --gpu-memory-utilization 0.85:
1,528 output tokens/s and a median TPOT of 274 ms, against 1,345 tokens/s and 145 ms for the same
checkpoint and layout on A100s, where vLLM runs FP8 as weight-only Marlin kernels; on the H100 it
runs FP8 through its Triton fused-MoE kernel, which has no tuned configuration for 160 experts of
width 192 on that GPU in vLLM's table (model_executor/layers/fused_moe/configs: the H200's is
there), and no speed model of the GPU's work places an H100 below an A100 on the same model.

GLM-4.5-Air (106B parameters, 12B active, 128 experts of which 8 a token, GQA; the importer reads
it from importer_support.glm_4_5_air_config) came later, from GPUStack's two pages of its vLLM 0.11
baseline at TP4 in BF16, on 4xA100 and 4xH100: ShareGPT, random 32K, 4K and 2K, all at once, each
random 2K and 4K run with its mean TPOT. The H100 page's random runs are its summary table's
figures: the outputs printed under them are the A100 page's, copied (_AIR_TABLE). Left out: the
pages' SGLang and TensorRT-LLM runs (other engines) and the A100 page's short-prompt run, whose
GPU work the planner puts above half the run (calibration_sources.GLM_AIR_H100_SHORT).

gpt-oss-120b on one A100 came last, from the page calibration_set already reads (its ShareGPT
runs): the six random runs it prints under "Other Benchmark Cases", the baseline `--max-model-len
32768` and the optimized `--async-scheduling --max-num-batched-tokens 4096` each at 32K, 4K and
2K prompts, with the 4K and 2K runs' mean TPOT. Their outputs end early (98 to 136 tokens of the
100 or 200 asked: the requests stop at the end-of-text token), so each row takes the run's own
mean lengths. They give the Triton attention share gpt-oss runs on below Hopper
(fitted.TRITON_ATTENTION_MFU) a second page; gpt-oss-20b's 32K run had been its only one.

The split was fixed before the constants were refitted, by one rule over runs: a run's figures
share a part; a run calibration_set already holds keeps its part there; within each page the
new runs, in the order the page prints them, alternate fit, held, fit, ..., the first fitted.
tests/serving/plan/test_published_measurements.py checks the rule.
"""

from __future__ import annotations

from dataclasses import replace

from calibration_row import Row, _p
from calibration_sources import (
    ALL_AT_ONCE,
    DSR1_H200,
    GLM_4_5_AIR,
    GLM_4_6,
    MEDIUM,
    OSS120_A100,
    OSS120_H100,
    OSS_A100,
    OSS_A100_TUNED,
    OSS_MEDIUM,
    Q14_A100,
    Q14_H100,
    Q32_A100,
    Q235_FP8_H100,
    Q235_H100,
    Q235_VERY_LONG,
    A,
    H,
    _gpustack,
    gpustack_page,
    served,
)

Q32_H100 = gpustack_page(
    "qwen3-32b/h100", "Qwen3-32B BF16, 1xH100 SXM, vLLM 0.11.0 `vllm serve Qwen/Qwen3-32B`"
)
Q235_A100_PAGE = gpustack_page(
    "qwen3-235b-a22b/a100", "Qwen3-235B-A22B-Instruct-2507 on 8xA100 SXM 80GB, vLLM 0.11.0"
)

# Mean lengths from each run's published totals.
Q32_H100_SHAREGPT = (217, 201)  # 217,393 in / 201,422 out over 1,000 requests
Q32_H100_VERY_LONG = (32000, 77)  # 3,200,000 / 7,681 over 100
LONG_200 = (3996, 200)  # random 4K: 1,997,942 in / 99,790-99,893 out over 500 requests
Q235_A100_LONG = (3996, 183)  # 1,997,942 / 91,352 over 500
Q235_A100_MEDIUM = (1996, 99)  # 998,175 / 49,632 over 500
Q235_A100_FP8_SHAREGPT_TP8_EP = (217, 197)  # 217,393 / 196,648 over 1,000
Q235_A100_FP8_SHAREGPT_TP4 = (217, 195)  # 217,393 / 195,140 over 1,000
Q235_A100_FP8_SHAREGPT_TP4_EP = (217, 196)  # 217,393 / 195,590 over 1,000
Q235_A100_FP8_SHAREGPT_4096 = (217, 196)  # 217,393 / 195,953 over 1,000
Q235_A100_FP8_SHAREGPT_8192 = (217, 196)  # 217,393 / 195,781 over 1,000
Q235_A100_FP8_VERY_LONG = (32000, 83)  # 3,200,000 / 8,300 over 100
Q235_A100_FP8_LONG = (3996, 181)  # 1,997,942 / 90,389 over 500
Q235_A100_FP8_MEDIUM = (1996, 99)  # 998,175 / 49,495 over 500
DSR1_LONG = (3995, 200)  # 1,997,530 / 100,000 over 500

# Qwen3-235B-A22B-Instruct-2507-FP8 on A100s: vLLM runs the FP8 checkpoint weight-only (W8A16,
# Marlin), as the page says; the planner does so wherever the GPU has no FP8 math.
_FP8_A100 = "Qwen3-235B-A22B-Instruct-2507-FP8 (W8A16 on A100: Marlin)"


GLM_H200 = gpustack_page(
    "glm-4.x/h200", "GLM-4.6 BF16, 8xH200 TP8, vLLM 0.11.0 `vllm serve zai-org/GLM-4.6 -tp 8`"
)
GLM_A100 = gpustack_page("glm-4.x/a100", "GLM-4.6-FP8 on 8xA100 SXM 80GB, vLLM 0.11.0")
# Mean lengths from each run's published totals.
GLM_SHAREGPT_H200 = (214, 200)  # 214,465 in / 199,702 out over 1,000 requests
GLM_SHAREGPT_A100 = (214, 200)  # 214,465 / 199,904 over 1,000
GLM_VERY_LONG = (32000, 94)  # 3,200,000 / 9,406 over 100
GLM_LONG = (4000, 200)  # 1,999,787 / 99,801 over 500
GLM_MEDIUM = (1999, 100)  # 999,429 / 50,000 over 500


GLM_AIR_A100 = gpustack_page(
    "glm-4.5-air/a100",
    "GLM-4.5-Air BF16, 4xA100 SXM 80GB TP4, vLLM 0.11.0 `vllm serve zai-org/GLM-4.5-Air -tp 4`",
)
GLM_AIR_H100 = gpustack_page(
    "glm-4.5-air/h100",
    "GLM-4.5-Air BF16, 4xH100 TP4, vLLM 0.11.0 `vllm serve zai-org/GLM-4.5-Air -tp 4`",
)
# Mean lengths from the A100 page's published totals; the H100 page's random runs are the same
# seeded prompts (--seed 42, the same tokenizer), its summary table giving no totals.
AIR_SHAREGPT = (214, 200)  # 214,465 in / 199,904 out over 1,000 requests (H100: 199,895 out)
AIR_VERY_LONG = (32000, 100)  # 3,200,000 / 9,987 over 100
AIR_LONG = (4000, 199)  # 1,999,787 / 99,547 over 500
AIR_MEDIUM = (1999, 100)  # 999,429 / 50,000 over 500
# gpt-oss-120b on one A100, GPUStack's "Other Benchmark Cases" (outputs end early: the random
# dataset's requests stop at the end-of-text token):
OSS_A100_VERY_LONG = (32000, 100)  # 3,200,000 / 9,988 over 100 (optimized: 9,828, 98)
OSS_A100_VERY_LONG_ASYNC = (32000, 98)
OSS_A100_LONG = (3998, 135)  # 1,999,249 / 67,259 over 500
OSS_A100_LONG_ASYNC = (3998, 136)  # 1,999,249 / 68,059
_OSS_BASE = "`vllm serve openai/gpt-oss-120b --max-model-len 32768`"
_OSS_TUNED = "`--max-model-len 32768 --async-scheduling --max-num-batched-tokens 4096`"
# The H100 page's figures for its random runs are its summary table's: the benchmark outputs
# printed under "Other Benchmark Cases" are the A100 page's, byte for byte (the same durations,
# 498.76 s for the 32K run), and disagree with the table by 2.6-3.3 times.
_AIR_TABLE = "figure from the page's summary table"


REGIME_ROWS: list[Row] = [
    # --- Qwen3-32B BF16 on one H100: 64 GiB of weights leave a small KV cache ----------------
    _gpustack(Q32_H100, f"ShareGPT 1,000 prompts, {ALL_AT_ONCE}", "output_tps", 1131.55,
              _p("qwen3-32b", "h100-80gb", workload=Q32_H100_SHAREGPT, max_model_len=40960,
                 **H), "fit"),
    _gpustack(Q32_H100, f"random 32,000 in / 100 out, 100 prompts, {ALL_AT_ONCE}", "total_tps",
              2771.81,
              _p("qwen3-32b", "h100-80gb", workload=Q32_H100_VERY_LONG, max_model_len=40960,
                 **H), "held"),
    _gpustack(Q32_H100, f"random 4,000 in / 200 out, 500 prompts, {ALL_AT_ONCE}", "total_tps",
              2148.69,
              _p("qwen3-32b", "h100-80gb", workload=LONG_200, max_model_len=40960, **H), "fit"),
    _gpustack(Q32_H100, f"random 2,000 in / 100 out, 500 prompts, {ALL_AT_ONCE}", "total_tps",
              3195.30,
              _p("qwen3-32b", "h100-80gb", workload=MEDIUM, max_model_len=40960, **H), "held"),
    # --- the random 4K runs of pages whose other runs calibration_set already holds ----------
    # Each is its page's only new row, so its first: fitted.
    _gpustack(Q14_H100, f"random 4,000 in / 200 out, 500 prompts, {ALL_AT_ONCE}", "total_tps",
              9218.03,
              _p("qwen3-14b", "h100-80gb", workload=LONG_200, max_model_len=40960, **H), "fit"),
    _gpustack(Q14_A100, f"random 4,000 in / 200 out, 500 prompts, {ALL_AT_ONCE}", "total_tps",
              5153.42,
              _p("qwen3-14b", "a100-80gb", workload=LONG_200, max_model_len=40960, **A), "fit"),
    _gpustack(Q32_A100, f"`vllm serve Qwen/Qwen3-32B`, random 4,000 in / 200 out, 500 prompts, "
              f"{ALL_AT_ONCE}", "total_tps", 1837.08,
              _p("qwen3-32b", "a100-80gb", workload=LONG_200, max_model_len=40960, **A), "fit"),
    _gpustack(DSR1_H200, f"`-tp 8`, random 4,000 in / 200 out, 500 prompts, {ALL_AT_ONCE}",
              "total_tps", 15808.55,
              _p("deepseek-v3", "h200-141gb", 8, workload=DSR1_LONG, max_model_len=32768, **H),
              "fit"),
    # --- Qwen3-235B-A22B on A100s (its ShareGPT run at TP8 BF16 is in calibration_set) -------
    _gpustack(
        Q235_A100_PAGE,
        f"{_FP8_A100} `-tp 8 --enable-expert-parallel`, ShareGPT 1,000 prompts, "
        f"{ALL_AT_ONCE}", "output_tps", 1776.73,
        _p("qwen3-235b-a22b", "a100-80gb", 8, workload=Q235_A100_FP8_SHAREGPT_TP8_EP,
           quantization="fp8", max_model_len=40960, **A)
        | {"parallelism": {"tensor": 8, "expert": True}}, "fit"),
    _gpustack(
        Q235_A100_PAGE,
        f"{_FP8_A100} `-tp 4`, ShareGPT 1,000 prompts, {ALL_AT_ONCE}", "output_tps",
        1428.16,
        _p("qwen3-235b-a22b", "a100-80gb", 4, workload=Q235_A100_FP8_SHAREGPT_TP4,
           quantization="fp8", max_model_len=40960, **A), "held"),
    _gpustack(
        Q235_A100_PAGE,
        f"{_FP8_A100} `-tp 4 --enable-expert-parallel`, ShareGPT 1,000 prompts, "
        f"{ALL_AT_ONCE}", "output_tps", 1332.94,
        _p("qwen3-235b-a22b", "a100-80gb", 4, workload=Q235_A100_FP8_SHAREGPT_TP4_EP,
           quantization="fp8", max_model_len=40960, **A)
        | {"parallelism": {"tensor": 4, "expert": True}}, "fit"),
    _gpustack(
        Q235_A100_PAGE,
        f"BF16 `-tp 8`, random 32,000 in / 100 out, 100 prompts, {ALL_AT_ONCE}",
        "total_tps", 6657.49,
        _p("qwen3-235b-a22b", "a100-80gb", 8, workload=Q235_VERY_LONG,
           max_model_len=40960, **A), "held"),
    _gpustack(
        Q235_A100_PAGE,
        f"BF16 `-tp 8`, random 4,000 in / 200 out, 500 prompts, {ALL_AT_ONCE}",
        "total_tps", 8170.72,
        _p("qwen3-235b-a22b", "a100-80gb", 8, workload=Q235_A100_LONG,
           max_model_len=40960, **A), "fit"),
    _gpustack(
        Q235_A100_PAGE,
        f"BF16 `-tp 8`, random 2,000 in / 100 out, 500 prompts, {ALL_AT_ONCE}",
        "total_tps", 9342.67,
        _p("qwen3-235b-a22b", "a100-80gb", 8, workload=Q235_A100_MEDIUM,
           max_model_len=40960, **A), "held"),
    _gpustack(
        Q235_A100_PAGE,
        f"{_FP8_A100} `-tp 4 --max-num-batched-tokens 4096`, ShareGPT 1,000 prompts, "
        f"{ALL_AT_ONCE}", "output_tps", 1434.07,
        _p("qwen3-235b-a22b", "a100-80gb", 4, workload=Q235_A100_FP8_SHAREGPT_4096,
           quantization="fp8", max_model_len=40960, max_num_seqs=256,
           max_num_batched_tokens=4096), "fit"),
    _gpustack(
        Q235_A100_PAGE,
        f"{_FP8_A100} `-tp 4 --max-num-batched-tokens 8192`, ShareGPT 1,000 prompts, "
        f"{ALL_AT_ONCE}", "output_tps", 1422.97,
        _p("qwen3-235b-a22b", "a100-80gb", 4, workload=Q235_A100_FP8_SHAREGPT_8192,
           quantization="fp8", max_model_len=40960, max_num_seqs=256,
           max_num_batched_tokens=8192), "held"),
    _gpustack(
        Q235_A100_PAGE,
        f"{_FP8_A100} `-tp 4`, random 32,000 in / 100 out, 100 prompts, {ALL_AT_ONCE}",
        "total_tps", 4132.51,
        _p("qwen3-235b-a22b", "a100-80gb", 4, workload=Q235_A100_FP8_VERY_LONG,
           quantization="fp8", max_model_len=40960, **A), "fit"),
    _gpustack(
        Q235_A100_PAGE,
        f"{_FP8_A100} `-tp 4`, random 4,000 in / 200 out, 500 prompts, {ALL_AT_ONCE}",
        "total_tps", 4633.41,
        _p("qwen3-235b-a22b", "a100-80gb", 4, workload=Q235_A100_FP8_LONG,
           quantization="fp8", max_model_len=40960, **A), "held"),
    _gpustack(
        Q235_A100_PAGE,
        f"{_FP8_A100} `-tp 4`, random 2,000 in / 100 out, 500 prompts, {ALL_AT_ONCE}",
        "total_tps", 5333.91,
        _p("qwen3-235b-a22b", "a100-80gb", 4, workload=Q235_A100_FP8_MEDIUM,
           quantization="fp8", max_model_len=40960, **A), "fit"),
    # --- GLM-4.6 BF16 on 8xH200, `vllm serve zai-org/GLM-4.6 -tp 8` -------------------------
    _gpustack(GLM_H200, f"ShareGPT 1,000 prompts, {ALL_AT_ONCE}", "output_tps", 2907.97,
              served(GLM_4_6, "h200-141gb", 8, GLM_SHAREGPT_H200, **H), "fit"),
    _gpustack(GLM_H200, f"random 32,000 in / 100 out, 100 prompts, {ALL_AT_ONCE}", "total_tps",
              15066.09, served(GLM_4_6, "h200-141gb", 8, GLM_VERY_LONG, **H), "held"),
    _gpustack(GLM_H200, f"random 4,000 in / 200 out, 500 prompts, {ALL_AT_ONCE}", "total_tps",
              16714.91, served(GLM_4_6, "h200-141gb", 8, GLM_LONG, **H), "fit"),
    _gpustack(GLM_H200, f"random 2,000 in / 100 out, 500 prompts, {ALL_AT_ONCE}", "total_tps",
              17214.85, served(GLM_4_6, "h200-141gb", 8, GLM_MEDIUM, **H), "held"),
    # --- GLM-4.6-FP8 on 8xA100, `vllm serve zai-org/GLM-4.6-FP8 -tp 8` ----------------------
    _gpustack(GLM_A100, f"`-tp 8`, ShareGPT 1,000 prompts, {ALL_AT_ONCE}", "output_tps",
              1345.12, served(GLM_4_6, "a100-80gb", 8, GLM_SHAREGPT_A100, quantization="fp8",
                              **A), "fit"),
    _gpustack(GLM_A100, f"`-tp 8 --enable-expert-parallel`, ShareGPT 1,000 prompts, "
              f"{ALL_AT_ONCE}", "output_tps", 1305.62,
              served(GLM_4_6, "a100-80gb", 8, GLM_SHAREGPT_A100, quantization="fp8", **A)
              | {"parallelism": {"tensor": 8, "expert": True}}, "held"),
    _gpustack(GLM_A100, f"`-tp 8 --max-num-batched-tokens 4096`, ShareGPT 1,000 prompts, "
              f"{ALL_AT_ONCE}", "output_tps", 1360.05,
              served(GLM_4_6, "a100-80gb", 8, GLM_SHAREGPT_A100, quantization="fp8",
                   **A | {"max_num_batched_tokens": 4096}), "fit"),
    _gpustack(GLM_A100, f"`-tp 8 --max-num-batched-tokens 8192`, ShareGPT 1,000 prompts, "
              f"{ALL_AT_ONCE}", "output_tps", 1362.78,
              served(GLM_4_6, "a100-80gb", 8, GLM_SHAREGPT_A100, quantization="fp8",
                   **A | {"max_num_batched_tokens": 8192}), "held"),
    _gpustack(GLM_A100, f"`-tp 8 --max-num-batched-tokens 16384`, ShareGPT 1,000 prompts, "
              f"{ALL_AT_ONCE}", "output_tps", 1359.74,
              served(GLM_4_6, "a100-80gb", 8, GLM_SHAREGPT_A100, quantization="fp8",
                   **A | {"max_num_batched_tokens": 16384}), "fit"),
    # --- GLM-4.5-Air BF16 on 4xA100, `vllm serve zai-org/GLM-4.5-Air -tp 4` ------------------
    _gpustack(GLM_AIR_A100, f"ShareGPT 1,000 prompts, {ALL_AT_ONCE}", "output_tps", 1883.14,
              served(GLM_4_5_AIR, "a100-80gb", 4, AIR_SHAREGPT, **A), "fit"),
    _gpustack(GLM_AIR_A100, f"random 32,000 in / 100 out, 100 prompts, {ALL_AT_ONCE}",
              "total_tps", 6435.97, served(GLM_4_5_AIR, "a100-80gb", 4, AIR_VERY_LONG, **A),
              "held"),
    _gpustack(GLM_AIR_A100, f"random 4,000 in / 200 out, 500 prompts, {ALL_AT_ONCE}",
              "total_tps", 6975.10, served(GLM_4_5_AIR, "a100-80gb", 4, AIR_LONG, **A), "fit"),
    _gpustack(GLM_AIR_A100, f"random 2,000 in / 100 out, 500 prompts, {ALL_AT_ONCE}",
              "total_tps", 8643.75, served(GLM_4_5_AIR, "a100-80gb", 4, AIR_MEDIUM, **A), "held"),
    # --- GLM-4.5-Air BF16 on 4xH100, `vllm serve zai-org/GLM-4.5-Air -tp 4` ------------------
    _gpustack(GLM_AIR_H100, f"ShareGPT 1,000 prompts, {ALL_AT_ONCE}", "output_tps", 3815.71,
              served(GLM_4_5_AIR, "h100-80gb", 4, AIR_SHAREGPT, **H), "fit"),
    _gpustack(GLM_AIR_H100, f"random 2,000 in / 100 out, 500 prompts, {ALL_AT_ONCE}, "
              f"{_AIR_TABLE}", "total_tps", 22582.76,
              served(GLM_4_5_AIR, "h100-80gb", 4, AIR_MEDIUM, **H), "held"),
    _gpustack(GLM_AIR_H100, f"random 4,000 in / 200 out, 500 prompts, {ALL_AT_ONCE}, "
              f"{_AIR_TABLE}", "total_tps", 21705.53,
              served(GLM_4_5_AIR, "h100-80gb", 4, AIR_LONG, **H), "fit"),
    _gpustack(GLM_AIR_H100, f"random 32,000 in / 100 out, 100 prompts, {ALL_AT_ONCE}, "
              f"{_AIR_TABLE}", "total_tps", 20732.85,
              served(GLM_4_5_AIR, "h100-80gb", 4, AIR_VERY_LONG, **H), "held"),
    # --- gpt-oss-120b MXFP4 on one A100, baseline then optimized --------------------------------
    _gpustack(OSS120_A100, f"{_OSS_BASE}, random 32,000 in / 100 out, 100 prompts, "
              f"{ALL_AT_ONCE}", "total_tps", 4337.21,
              _p("gpt-oss-120b", "a100-80gb", workload=OSS_A100_VERY_LONG, **OSS_A100), "fit"),
    _gpustack(OSS120_A100, f"{_OSS_BASE}, random 4,000 in / 200 out, 500 prompts, "
              f"{ALL_AT_ONCE}", "total_tps", 7671.00,
              _p("gpt-oss-120b", "a100-80gb", workload=OSS_A100_LONG, **OSS_A100), "held"),
    _gpustack(OSS120_A100, f"{_OSS_BASE}, random 2,000 in / 100 out, 500 prompts, "
              f"{ALL_AT_ONCE}", "total_tps", 8456.65,
              _p("gpt-oss-120b", "a100-80gb", workload=OSS_MEDIUM, **OSS_A100), "fit"),
    _gpustack(OSS120_A100, f"{_OSS_TUNED}, random 32,000 in / 100 out, 100 prompts, "
              f"{ALL_AT_ONCE}", "total_tps", 4605.91,
              _p("gpt-oss-120b", "a100-80gb", workload=OSS_A100_VERY_LONG_ASYNC,
                 **OSS_A100_TUNED), "held"),
    _gpustack(OSS120_A100, f"{_OSS_TUNED}, random 4,000 in / 200 out, 500 prompts, "
              f"{ALL_AT_ONCE}", "total_tps", 8468.21,
              _p("gpt-oss-120b", "a100-80gb", workload=OSS_A100_LONG_ASYNC, **OSS_A100_TUNED),
              "fit"),
    _gpustack(OSS120_A100, f"{_OSS_TUNED}, random 2,000 in / 100 out, 500 prompts, "
              f"{ALL_AT_ONCE}", "total_tps", 9249.89,
              _p("gpt-oss-120b", "a100-80gb", workload=OSS_MEDIUM, **OSS_A100_TUNED),
              "held"),
]  # fmt: skip


# Mean TPOT (ms) of every random 2,000/100 and 4,000/200 run in the set, as each run's benchmark
# output prints it: (page, words of the run's setup, mean TPOT).
MEAN_TPOT_MS: list[tuple[str, str, float]] = [
    (Q32_H100[0], "random 4,000", 66.61),
    (Q32_H100[0], "random 2,000", 86.62),
    (Q14_H100[0], "random 4,000", 132.45),
    (Q14_H100[0], "random 2,000", 206.51),
    (Q14_A100[0], "random 4,000", 254.61),
    (Q14_A100[0], "random 2,000", 301.73),
    (Q32_A100[0], "random 4,000", 96.19),
    (Q32_A100[0], "random 2,000", 143.23),
    (DSR1_H200[0], "random 4,000", 164.23),
    (DSR1_H200[0], "random 2,000", 237.02),
    (Q235_A100_PAGE[0], "BF16 `-tp 8`, random 4,000", 205.64),
    (Q235_A100_PAGE[0], "BF16 `-tp 8`, random 2,000", 190.79),
    (Q235_A100_PAGE[0], "`-tp 4`, random 4,000", 347.13),
    (Q235_A100_PAGE[0], "`-tp 4`, random 2,000", 342.39),
    (Q235_H100[0], "random 4,000", 68.94),
    (Q235_H100[0], "random 2,000", 101.08),
    (Q235_FP8_H100[0], "16384`, random 4,000", 89.52),
    (Q235_FP8_H100[0], "16384`, random 2,000", 125.93),
    (OSS120_H100[0], "random 2,000", 41.35),
    (GLM_H200[0], "random 4,000", 205.69),
    (GLM_H200[0], "random 2,000", 269.75),
    (GLM_AIR_A100[0], "random 4,000", 267.38),
    (GLM_AIR_A100[0], "random 2,000", 204.31),
    (GLM_AIR_H100[0], "random 2,000", 125.44),
    (GLM_AIR_H100[0], "random 4,000", 82.53),
    (OSS120_A100[0], "32768`, random 4,000", 112.18),
    (OSS120_A100[0], "32768`, random 2,000", 131.94),
    (OSS120_A100[0], "4096`, random 4,000", 99.77),
    (OSS120_A100[0], "4096`, random 2,000", 117.85),
]


def mean_tpot_rows(rows: list[Row]) -> list[Row]:
    """Each run's mean time per output token (MEAN_TPOT_MS) as a row of its own, in the run's
    part: `rows` must hold the run's throughput row, found by its page and setup."""
    tpot = []
    for page, words, mean_tpot_ms in MEAN_TPOT_MS:
        (run,) = [
            r for r in rows if r.source == page and words in r.setup and r.metric == "total_tps"
        ]
        tpot.append(replace(run, metric="burst_tpot", published=mean_tpot_ms))
    return tpot
