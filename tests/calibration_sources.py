"""Where the calibration set's rows were read (tests/calibration_set.py): the published pages
and their setups, the mean lengths from their published totals, and the measured servers'
per-request frontend work (FRONTEND_RUNS, VLLM_0_11_QWEN3_TEMPLATE_PARSE_S)."""

from __future__ import annotations

from typing import Any

from calibration_row import (
    ASYNC,
    SHORT_PROMPT,
    VLLM_AMPERE,
    VLLM_HOPPER,
    FrontendRun,
    Metric,
    Part,
    Row,
    _p,
)
from importer_support import as_file, fixture_file, glm_4_5_air_config

from serving.catalog.importer.build import import_architecture

GPUSTACK = "https://docs.gpustack.ai/latest/performance-lab/"
GPUSTACK_REPO = "github.com/gpustack/gpustack docs/performance-lab/"


def gpustack_page(page: str, setup: str) -> tuple[str, str]:
    """A GPUStack performance-lab page, on the docs site and in its repository, and the setup
    its rows share: the (source, setup) a row of it starts from."""
    return f"{GPUSTACK}{page} ; {GPUSTACK_REPO}{page}.md", setup


VLLM_NIGHTLY = (
    "vLLM nightly performance benchmark (Buildkite builds 9555 H100, 9515 H200, 9523 A100, of "
    "October 2024: vLLM 0.6, the V0 engine; build 9515 is the run vLLM PR #9768 links): "
    "latency tests, batch 8, 32 in / 128 out, BF16; per step = request latency / 128"
)
NIM = (
    "https://docs.nvidia.com/nim/benchmarking/llm/latest/performance.html — NVIDIA NIM "
    "Llama-3.3-70B-Instruct 1.8.0, 2xH100 FP8 TP2, concurrency 1"
)
TRTLLM = (
    "https://raw.githubusercontent.com/NVIDIA/TensorRT-LLM/release/0.5.0/docs/source/"
    "performance.md — batch-1 first-token latency, Llama-2-70B (engine level, no server)"
)
BLOG = (
    "J. Musgrave, 'vLLM throughput-latency sweep on NVIDIA A100' "
    "(https://johnmusgrave.com/p/vllm-throughput-latency-sweep-on): vLLM 0.23.0 `vllm serve` "
    "(async scheduling on by default), Llama-3.1-8B BF16, 1xA100-40GB, concurrency 1, 1024 in / "
    "128 out, about 75 tokens/s"
)

# Llama-2-70B is not in the catalog; its published config.json, inline.
LLAMA_2_70B: dict[str, Any] = {
    "key": "llama-2-70b",
    "hf_repo": "meta-llama/Llama-2-70b-hf",
    "total_params": 68.98e9,
    "active_params": 68.98e9,
    "num_layers": 80,
    "hidden_size": 8192,
    "num_attention_heads": 64,
    "num_kv_heads": 8,
    "head_dim": 128,
    "intermediate_size": 28672,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
}


# GLM-4.6 as a user's own model is planned (`servestack plan --config`): the architecture the
# importer reads from the stored config.json of GLM-4.5, which GLM-4.6 keeps with a longer
# context (max_position_embeddings 202,752, vLLM's default max_model_len).
GLM_CONTEXT = 202752
GLM_4_6: dict[str, Any] = import_architecture(
    fixture_file("zai-org__GLM-4.5"), key="glm-4.6"
).model_dump(mode="json") | {"max_position_embeddings": GLM_CONTEXT}
# GLM-4.5-Air (106B parameters, 12B active), read by the importer from its config.json
# (importer_support.glm_4_5_air_config); its context, 131,072, is vLLM's default max_model_len.
GLM_4_5_AIR: dict[str, Any] = import_architecture(
    as_file(glm_4_5_air_config()), key="glm-4.5-air"
).model_dump(mode="json")


def served(
    arch: dict[str, Any], gpu: str, tensor: int, workload: tuple[int, int], **extra: Any
) -> dict[str, Any]:
    """A user's own model (an imported architecture) as `vllm serve` ran it with no
    --max-model-len: at vLLM's default context, the model's max_position_embeddings."""
    context = arch["max_position_embeddings"]
    return _p(arch, gpu, tensor, workload=workload, max_model_len=context, **extra)


# ShareGPT (vllm bench serve --dataset-name sharegpt) as GPUStack ran it: mean lengths from the
# published totals (input and generated tokens over the successful requests).
QWEN_SHAREGPT = (217, 202)  # 217,393 in / ~201,600 out over 1,000 requests
QWEN_SHAREGPT_100 = (233, 221)  # 23,260 / 22,061 over 100 requests (latency runs)
OSS_SHAREGPT = (215, 196)  # 215,312 / ~196,000 over 1,000
OSS20_SHAREGPT_H100 = (215, 194)  # gpt-oss-20b on an H100: 215,312 / 193,979
OSS_SHAREGPT_100 = (229, 217)  # 22,946 / 21,691 over 100
DSR1_SHAREGPT = (219, 201)  # 219,171 / 200,752 over 1,000
DSR1_SHAREGPT_100 = (228, 213)  # 22,836 / 21,338 over 100
Q235_SHAREGPT = (216, 197)  # qwen3-235b on H100s: 212,894 / 193,865 over 984
Q235_A100_SHAREGPT = (217, 196)  # qwen3-235b on A100s: 217,393 / 196,004 over 1,000
MEDIUM = (1996, 100)  # random 2K: 998,175 in / 50,000 out over 500 requests
VERY_LONG = (32000, 99)  # random 32K: 3,200,000 in / ~9,900 out over 100 requests
# Runs whose outputs end earlier than the rows above (the model's end-of-text token):
OSS_MEDIUM = (1998, 98)  # gpt-oss's tokenizer: 999,120 in / 48,981-49,197 out over 500
Q235_MEDIUM = (1996, 99)  # qwen3-235b BF16 on H100s: 998,175 / 49,500
Q235_VERY_LONG = (32000, 82)  # qwen3-235b BF16, H100s and A100s alike: 3,200,000 / 8,191
Q32_A100_VERY_LONG = (32000, 77)  # qwen3-32b on an A100: 3,200,000 / 7,699
OSS20_A100_VERY_LONG = (32000, 95)  # gpt-oss-20b on an A100: 3,200,000 / 9,533

Q8_H100 = gpustack_page(
    "qwen3-8b/h100-latency",
    "Qwen3-8B BF16, 1xH100 SXM, vLLM 0.11.0 `vllm serve Qwen/Qwen3-8B`, ShareGPT 100 prompts",
)
OSS120_H100 = gpustack_page("gpt-oss-120b/h100", "gpt-oss-120b MXFP4, H100 SXM, vLLM 0.10.2")
OSS120_A100 = gpustack_page("gpt-oss-120b/a100", "gpt-oss-120b MXFP4, A100 SXM 80GB, vLLM 0.11.0")
# That page's two servers on one A100: the baseline `--max-model-len 32768` and the optimized
# `--async-scheduling --max-num-batched-tokens 4096`.
OSS_A100 = {"max_model_len": 32768, **VLLM_AMPERE}
OSS_A100_TUNED = {"max_model_len": 32768, "max_num_seqs": 256, "max_num_batched_tokens": 4096,
                  **ASYNC}  # fmt: skip
OSS20_H100 = (GPUSTACK + "gpt-oss-20b/h100", "gpt-oss-20b MXFP4, 1xH100 SXM, vLLM 0.11.0")
OSS20_A100 = (GPUSTACK + "gpt-oss-20b/a100", "gpt-oss-20b MXFP4, 1xA100 SXM 80GB, vLLM 0.11.0")
Q14_H100 = (GPUSTACK + "qwen3-14b/h100", "Qwen3-14B BF16, 1xH100 SXM, vLLM 0.11.0")
Q14_A100 = (GPUSTACK + "qwen3-14b/a100", "Qwen3-14B BF16, 1xA100 SXM 80GB, vLLM 0.11.0")
Q32_A100 = (GPUSTACK + "qwen3-32b/a100", "Qwen3-32B BF16, 1xA100 SXM 80GB, vLLM 0.11.0")
Q235_H100 = (GPUSTACK + "qwen3-235b-a22b/h100", "Qwen3-235B-A22B-2507 BF16, 8xH100 TP8, v0.11.0")
Q235_A100 = (GPUSTACK + "qwen3-235b-a22b/a100", "Qwen3-235B-A22B-2507 BF16, 8xA100 TP8, v0.11.0")
Q235_FP8_H100 = gpustack_page(
    "qwen3-235b-a22b/h100",
    "Qwen3-235B-A22B-Instruct-2507-FP8 (FP8 in 128x128 blocks), H100 SXM, vLLM 0.11.0",
)
DSR1_H200 = gpustack_page("deepseek-r1/h200", "DeepSeek-R1-0528 FP8, 8xH200 TP8, vLLM 0.11.0")
ALL_AT_ONCE = "every request sent at once (no rate limit)"
# vLLM 0.11.0 parses the whole chat template again for every chat request: apply_hf_chat_template
# calls resolve_chat_template_kwargs, which builds a jinja2 sandbox and runs env.parse and
# find_undeclared_variables on it, synchronously on the API server's event loop
# (vllm/entrypoints/chat_utils.py and openai/serving_engine.py _preprocess_chat, vllm-0.11.0
# sdist on PyPI). vLLM 0.22.0, the version servestack deploys, caches that parse
# (vllm/renderers/hf.py, _cached_resolve_chat_template_kwargs), and gpt-oss never takes the path
# (serving_chat's harmony branch). For Qwen3's 4.1 KB template the parse costs 13-15 ms of CPU
# time on one AMD EPYC core (jinja2 3.1.6, process time, best of seven runs of 30). The Qwen3-8B
# runs show the loop blocked: at concurrency 2 (a fit run) mean ITL exceeds mean TPOT by 1% (7.44
# against 7.37 ms), the tokens the loop could not stream while blocked arriving merged, about two
# (15 ms) per arrival. Only the rows measured on vLLM 0.11 with Qwen3's template carry it;
# DeepSeek-R1's run pays its own template's parse too, not measured, so not added.
VLLM_0_11_QWEN3_TEMPLATE_PARSE_S = 13e-3
# Mean lengths from the published totals, as above.
Q235_FP8_SHAREGPT_TP4 = (216, 198)  # 212,992 in / 194,446 out over 984 requests
Q235_FP8_SHAREGPT_TP4_EP = (218, 196)  # 214,311 / 192,752 over 984
Q235_FP8_SHAREGPT_TP8_EP = (215, 195)  # 211,761 / 192,350 over 984
Q235_FP8_SHAREGPT_16K = (218, 197)  # --max-num-batched-tokens 16384: 214,381 / 194,148 over 984
Q235_LONG = (3996, 184)  # random 4K: 1,997,942 in / 92,185 out over 500 requests
Q235_FP8_MEDIUM = (1996, 99)  # 998,175 / 49,471 over 500
Q235_FP8_LONG = (3996, 182)  # 1,997,942 / 90,966 over 500
Q235_FP8_VERY_LONG = (32000, 83)  # 3,200,000 / 8,281 over 100


def _gpustack(
    where: tuple[str, str], what: str, metric: Metric, value: float, profile: dict[str, Any],
    part: Part, batch: int = 1, retired_frontend_s: float = 0.0, serial_frontend_s: float = 0.0,
) -> Row:  # fmt: skip
    """A row of a GPUStack page. Its server's serial work per request is what the row says,
    else what the page's own short-prompt run measured (FRONTEND_RUNS), else unknown (0)."""
    serial = serial_frontend_s or frontend_serial_s(where[0])
    # GPUStack's latency runs are `vllm bench serve --max-concurrency c`: a closed loop.
    return Row(
        where[0], f"{where[1]}; {what}", metric, value, profile, part, batch=batch,
        retired_frontend_s=retired_frontend_s, serial_frontend_s=serial,
        closed_loop=batch > 1,
    )  # fmt: skip


def frontend_serial_s(source: str) -> float:
    """The serial work per request that the page `source` names measured with its short-prompt
    run (FRONTEND_RUNS), or 0 where it has none that qualifies."""
    page = source.split(" ;")[0]
    return next((run.serial_s for run in FRONTEND_RUNS if run.source == page), 0.0)


H = VLLM_HOPPER
A = VLLM_AMPERE

# vLLM 0.11's serial work per chat request, read off the short-prompt runs of the same pages
# (`vllm serve`, no options): Qwen3-14B on one H100, 5,796.73 tokens/s in total, 22.8 ms per
# request, where the planner puts the GPU's work at 9.4 s of the run's 22.8 s (SGLang serves the
# same prompts at 7.8 ms per request); DeepSeek-R1 on 8xH200, 5,931.25 tokens/s, 22.3 ms per
# request. Qwen3-8B's template is Qwen3-14B's; the parse above is part of that work. The
# gpt-oss pages' short runs (7.7 ms per request on an H100 under 0.10.2, 14.1 ms on an A100)
# leave the GPU's work more than half of the run, so they only bound the serial work from above
# and are not used.
QWEN3_14B_H100_SHORT = FrontendRun(
    GPUSTACK + "qwen3-14b/h100",
    _p("qwen3-14b", "h100-80gb", workload=SHORT_PROMPT, max_model_len=40960, **H),
    5796.73,
)
DSR1_H200_SHORT = FrontendRun(
    GPUSTACK + "deepseek-r1/h200",
    _p("deepseek-v3", "h200-141gb", 8, workload=SHORT_PROMPT, max_model_len=32768, **H),
    5931.25,
)
# GLM-4.6 on 8xH200 (its page's baseline `-tp 8`): 1,000 requests in 13.89 s, 9,497.19
# tokens/s, 13.9 ms per request, where the planner puts the GPU's work at 6.4 s. Qwen3-235B's
# page on 8xH100 (984 requests in 8.83 s, 9.0 ms each) does not qualify: the planner puts its
# GPU work at 4.9 s, more than half the run, so its short run bounds the serial work only.
GLM_H200_SHORT = FrontendRun(
    GPUSTACK + "glm-4.x/h200",
    served(GLM_4_6, "h200-141gb", 8, SHORT_PROMPT, **H),
    9497.19,
)
# GLM-4.5-Air on 4xH100 (`-tp 4`): 7,066.67 tokens/s, 18.7 ms per request, where the planner puts
# the GPU's work at 4.4 s of the run's 18.7 s. The figure is the page's summary table's: the raw
# outputs printed under it are the A100 page's, copied (calibration_set_regimes). The A100 page's
# own short run (6,271.24 tokens/s, 21.0 ms a request) does not qualify: the planner puts its
# GPU work at 11.7 s, more than half the run.
GLM_AIR_H100_SHORT = FrontendRun(
    GPUSTACK + "glm-4.5-air/h100",
    served(GLM_4_5_AIR, "h100-80gb", 4, SHORT_PROMPT, **H),
    7066.67,
)
FRONTEND_RUNS = (QWEN3_14B_H100_SHORT, DSR1_H200_SHORT, GLM_H200_SHORT, GLM_AIR_H100_SHORT)
