"""Start vLLM 0.22's CPU build on a tiny Llama, queue bursts of requests at once, and write what
its scheduler put in every step: each request's tokens, and whether they were prompt or output.
Run by tests/serving/plan/test_burst_opening_vllm.py:

    python tests/vllm_opening_probe.py OUT.json MODEL_DIR BURSTS_JSON

MODEL_DIR holds only a config.json (dummy weights, no tokenizer, eager mode); BURSTS_JSON is a
list of {"requests": N, "prompt": P, "output": O}. Each burst's prompts are distinct random
token ids (no prefix-cache hits), each asks for exactly O tokens (ignore_eos), and each burst
runs to its end before the next is queued.
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path
from typing import Any

MAX_MODEL_LEN = 2048
BATCHED_TOKENS = 256
MAX_NUM_SEQS = 128
VOCAB = 512
ENV = {
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    # One core: the model is tiny, and the suite's local Ray runs on the other worker meanwhile.
    "VLLM_CPU_OMP_THREADS_BIND": "0",
    "HF_HUB_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
}


def run(model: Path, bursts: list[dict[str, int]]) -> list[dict[str, Any]]:
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    llm = LLM(
        model=str(model),
        load_format="dummy",
        skip_tokenizer_init=True,
        enforce_eager=True,
        max_model_len=MAX_MODEL_LEN,
        max_num_batched_tokens=BATCHED_TOKENS,
        max_num_seqs=MAX_NUM_SEQS,
        dtype="bfloat16",
    )
    engine = llm.llm_engine
    scheduler = engine.engine_core.engine_core.scheduler
    steps: list[dict[str, int]] = []
    schedule = scheduler.schedule

    def recording_schedule() -> Any:
        out = schedule()
        steps.append(dict(out.num_scheduled_tokens))
        return out

    scheduler.schedule = recording_schedule
    rng = random.Random(0)
    results = []
    for n, burst in enumerate(bursts):
        steps.clear()
        params = SamplingParams(max_tokens=burst["output"], ignore_eos=True)
        for i in range(burst["requests"]):
            ids = [rng.randrange(1, VOCAB) for _ in range(burst["prompt"])]
            engine.add_request(f"{n}-{i}", TokensPrompt(prompt_token_ids=ids), params)
        while engine.has_unfinished_requests():
            engine.step()
        results.append(burst | {"steps": [s for s in steps if s]})
    return results


def main() -> None:
    out, model, bursts = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3])
    out.write_text(json.dumps(run(model, bursts)))


if __name__ == "__main__":
    os.environ.update(ENV)
    main()
