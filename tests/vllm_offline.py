"""vLLM 0.22's CPU build started in this process on a config.json alone, as the probes run it
(tests/vllm_kv_probe.py, tests/vllm_opening_probe.py): dummy weights, no tokenizer, eager mode,
the engine core in-process so its scheduler can be read. `env` is set before vLLM is imported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

MAX_MODEL_LEN = 2048
BATCHED_TOKENS = 256


def env(cache_gib: int, threads: str) -> dict[str, str]:
    """The probe's environment: a KV cache of `cache_gib`, OpenMP bound to `threads`."""
    return {
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
        "VLLM_CPU_KVCACHE_SPACE": str(cache_gib),
        "VLLM_CPU_OMP_THREADS_BIND": threads,
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
    }


def llm(model: Path, max_num_seqs: int) -> Any:
    """An offline engine on the model directory's config.json, MAX_MODEL_LEN long, a budget of
    BATCHED_TOKENS a step."""
    from vllm import LLM

    return LLM(
        model=str(model),
        load_format="dummy",
        skip_tokenizer_init=True,
        enforce_eager=True,
        max_model_len=MAX_MODEL_LEN,
        max_num_batched_tokens=BATCHED_TOKENS,
        max_num_seqs=max_num_seqs,
        dtype="bfloat16",
    )
