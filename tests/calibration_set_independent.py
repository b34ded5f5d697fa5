"""Calibration rows from publishers other than GPUStack's performance lab (issue 32 asked for
independent sources), for the regime the planner missed most: MLA at TP8 on Hopper.

dstack's DeepSeek-R1 benchmark on 8xH200 (https://dstack.ai/blog/h200-mi300x-deepskeek-benchmark/,
with its scripts, setup and raw results in github.com/dstackai/benchmarks, branch
deepseek-r1-benchmark, folder Deepseek-R1). Its README states the setup: 8x NVIDIA H200 SXM5
141GB; vLLM 0.7.4.dev181+gf35f8e22 (a nightly build installed over the v0.7.3 image) with
`VLLM_ATTENTION_BACKEND=FLASHMLA vllm serve deepseek-ai/DeepSeek-R1 --trust-remote-code
--tensor-parallel-size 8`, and for the prefix-cached runs `--enable-prefix-caching
--enable-chunked-prefill` added; the client is SGLang's bench_serving.py with `--backend vllm`
(the completions endpoint, no chat template), 500 prompts at `--max-concurrency c` (a closed
loop), random prompts of exactly 3,200 tokens (`--random-range-ratio 1`) and 800 to 6,400 output
tokens, or the generated-shared-prefix set (10 groups of 50 prompts, a 2,000-token system prompt
and a 1,200-token question each, 800 output tokens). Each row is one run's `mean_tpot_ms` in
raw_data/online_results.csv (the mean time per output token after the first, per request).

What the rows take from the setup. The random runs' server enables neither prefix caching nor
chunked prefill, so it is vLLM 0.7's V0 engine with their defaults off (the flags the page adds for
the prefix-cached runs): whole prompts a step (max_num_batched_tokens = max_model_len), 256
sequences at most, synchronous scheduling; the task's environment sets VLLM_ATTENTION_BACKEND only,
not VLLM_USE_V1, and the change that made V1 the default when it is unset (vLLM PR #13726, "V1
Enablement Oracle", https://github.com/vllm-project/vllm/pull/13726) was still in review on
2025-03-04, after the same commit, f35f8e22, had been built and served on 2025-03-03 (another user's
log in vLLM issue #14209 reads 0.7.4.dev181+gf35f8e22.d20250303, where V1 was asked for with
VLLM_USE_V1=1); so each row is `engine="v0"` and its steps pay V0's host time
(fitted.V0_STEP_OVERHEAD_S, calibration_score.v0_host_time). The prefix-cached runs take V0's
chunked-prefill budget, 2,048 tokens, and a hit rate of what the groups share: 490 of 500 prompts
find their group's 2,000-token system prompt cached, 980,000 of the runs' 1,636,216 prompt tokens
(0.6).
DeepSeek-R1's max_position_embeddings, 163,840, is the context length. The planned TPOT does not
depend on the token budget at these concurrencies (2,048 against 8,192 changes it by under
0.1%).

What the rows leave out. The runs' time to first token is not used: it is about a second at
concurrency 4 for all three engines the page measured on the H200 (vLLM 976 ms, TensorRT-LLM
1,004 ms, SGLang 3,904 ms), where prefilling one 3,200-token prompt on eight H200s takes a
tenth of that; the client's own work (it builds each random prompt by decoding token ids to
text, which the server tokenizes again) is not separated from the server's, and the page does
not say what the second is. The same page's SGLang, TensorRT-LLM and MI300X runs are other
engines or GPUs.

The split follows calibration_set_regimes' rule, by runs, in the order the CSV lists the vLLM
H200 runs: fit, held, fit, ... (tests/serving/plan/test_published_measurements.py checks it).
"""

from __future__ import annotations

from typing import Any

from calibration_row import Part, Row, _p

DSTACK = (
    "https://github.com/dstackai/benchmarks/blob/deepseek-r1-benchmark/Deepseek-R1/raw_data/"
    "online_results.csv (commit 7f37e66), setup in Deepseek-R1/README.md; "
    "https://dstack.ai/blog/h200-mi300x-deepskeek-benchmark/"
)
_SERVE = "DeepSeek-R1 FP8, 8xH200 SXM5 TP8, vLLM 0.7.4.dev181 (V0) FLASHMLA"
# V0's defaults with chunked prefill off: the whole prompt in one step, 256 sequences.
_V0 = {"max_num_seqs": 256, "max_num_batched_tokens": 163840, "prefix_caching": False}
# V0's defaults with --enable-chunked-prefill --enable-prefix-caching.
_V0_CHUNKED = {"max_num_seqs": 256, "max_num_batched_tokens": 2048}
_PROMPT = 3200
# The generated-shared-prefix runs: 1,636,216 prompt tokens over 500 requests, 980,000 of
# them a cached system prompt.
_SHARED_PROMPT = 3272
_SHARED_HIT_RATE = 0.6


def _random(concurrency: int, output: int, tpot_ms: float, part: Part) -> Row:
    profile = _p("deepseek-v3", "h200-141gb", 8, workload=(_PROMPT, output),
                 max_model_len=163840, **_V0)  # fmt: skip
    setup = (
        f"{_SERVE}; random {_PROMPT} in / {output} out (range ratio 1), 500 prompts, "
        f"--max-concurrency {concurrency}; mean TPOT"
    )
    return Row(DSTACK, setup, "tpot", tpot_ms, profile, part, batch=concurrency,
               fixed_prompts=True, closed_loop=True, engine="v0")  # fmt: skip


def _shared(concurrency: int, tpot_ms: float, part: Part) -> Row:
    profile: dict[str, Any] = _p("deepseek-v3", "h200-141gb", 8, max_model_len=163840,
                                 **_V0_CHUNKED)  # fmt: skip
    profile["workload"] = {
        "input_tokens": _SHARED_PROMPT,
        "output_tokens": 800,
        "prefix_cache_hit_rate": _SHARED_HIT_RATE,
    }
    setup = (
        f"{_SERVE} --enable-prefix-caching --enable-chunked-prefill; generated-shared-prefix "
        f"(10 groups x 50, 2,000-token system prompt, 1,200-token question), 800 out, 500 "
        f"prompts, --max-concurrency {concurrency}; mean TPOT"
    )
    return Row(DSTACK, setup, "tpot", tpot_ms, profile, part, batch=concurrency,
               closed_loop=True, engine="v0")  # fmt: skip


INDEPENDENT_ROWS: list[Row] = [
    # In the CSV's order of the vLLM H200 runs.
    _random(128, 800, 71.85856239, "fit"),
    _random(64, 800, 65.61773396, "held"),
    _random(32, 800, 51.66990612, "fit"),
    _random(16, 800, 49.60112449, "held"),
    _random(8, 800, 31.28089729, "fit"),
    _random(4, 800, 25.72997376, "held"),
    _shared(128, 91.35211261, "fit"),
    _shared(64, 62.25188014, "held"),
    _shared(32, 48.03350236, "fit"),
    _random(128, 1600, 73.86396926, "held"),
    _random(128, 3200, 76.04368982, "fit"),
    _random(128, 6400, 133.1230548, "held"),
]
