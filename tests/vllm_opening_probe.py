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

import vllm_offline

MAX_NUM_SEQS = 128
VOCAB = 512
# One core: the model is tiny, and the suite's local Ray runs on the other worker meanwhile.
ENV = vllm_offline.env(cache_gib=1, threads="0")


def run(model: Path, bursts: list[dict[str, int]]) -> list[dict[str, Any]]:
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    llm = vllm_offline.llm(model, MAX_NUM_SEQS)
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
