"""The planner's burst opening (serving.plan.speed.burst.opening) against vLLM 0.22's own
scheduler: bursts of requests queued at once on a tiny Llama in vLLM's CPU build
(tests/vllm_opening_probe.py records what each step scheduled), and the planner's count of the
steps their prompts take, the output tokens decoded meanwhile and the sequences still running
at the end, for the same token budget, prompts and outputs.

What is compared is the scheduler's token accounting, which the CPU build runs as it runs on a
GPU (vllm/v1/core/sched/scheduler.py is the same code); how long each step takes is the speed
model's, which no CPU measures. One difference is known and stays: vLLM samples an output's
first token in the step that computes the prompt's last chunk, while the planner counts every
output token at a step after it, so with outputs of 10 tokens the planner decodes about a tenth
more in the opening than vLLM does (258 against 230 tokens, below).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import vllm_offline
from kv_probe_models import write_models
from planner_support import spec
from repo import REPO
from vllm_opening_probe import MAX_NUM_SEQS

from serving.catalog.importer import import_architecture, parse_json
from serving.plan.placement import choose_machine
from serving.plan.speed.burst import opening

pytestmark = [pytest.mark.vllm, pytest.mark.xdist_group("vllm-kv-probe")]

# 32 prompts of 200 tokens against a budget of 256 a step: about 26 steps to admit them, longer
# than outputs of 10 tokens (the earliest end inside the opening) and shorter than outputs of 40.
BURSTS = [
    {"requests": 32, "prompt": 200, "output": 10},
    {"requests": 32, "prompt": 200, "output": 40},
]


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    root = tmp_path_factory.mktemp("opening-probe")
    model = write_models(root)["llama"]
    out = root / "bursts.json"
    subprocess.run(
        [sys.executable, str(REPO / "tests" / "vllm_opening_probe.py"), str(out), str(model),
         json.dumps(BURSTS)],
        check=True, timeout=900, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    return model, json.loads(out.read_text())


def _opening_of(run: dict[str, Any]) -> tuple[int, int, int]:
    """From vLLM's steps: the step that scheduled the last prompt chunk (the opening's length),
    the output tokens scheduled up to it, and the requests still scheduled after it."""
    prompt = run["prompt"]
    computed: dict[str, int] = {}
    last = 0
    for i, step in enumerate(run["steps"], 1):
        for request, tokens in step.items():
            computed[request] = computed.get(request, 0) + tokens
            if computed[request] - tokens < prompt:
                last = i
    computed.clear()
    decoded = 0
    for step in run["steps"][:last]:
        for request, tokens in step.items():
            if computed.get(request, 0) >= prompt:
                decoded += tokens
            computed[request] = computed.get(request, 0) + tokens
    running = {request for step in run["steps"][last:] for request in step}
    return last, decoded, len(running)


@pytest.mark.parametrize("burst", range(len(BURSTS)))
def test_the_opening_admits_and_decodes_as_vllms_scheduler_does(
    burst: int, measured: tuple[Path, list[dict[str, Any]]]
) -> None:
    model, runs = measured
    run = runs[burst]
    steps, decoded, running = _opening_of(run)
    config = model / "config.json"
    arch = import_architecture(parse_json(config.read_bytes(), str(config)))
    work = {"input_tokens": run["prompt"], "output_tokens": run["output"]}
    planned_spec = spec(
        architecture=arch.model_dump(),
        max_model_len=vllm_offline.MAX_MODEL_LEN,
        max_num_batched_tokens=vllm_offline.BATCHED_TOKENS,
        max_num_seqs=MAX_NUM_SEQS,
        workload=work | {"max_output_tokens": run["output"]},
    )
    layout = planned_spec.parallelism
    machine = choose_machine(planned_spec, layout.gpus_per_replica)
    planned = opening(planned_spec, machine, layout, run["requests"])
    assert planned.steps == pytest.approx(steps, rel=0.05)
    assert planned.decoded == pytest.approx(decoded, rel=0.15)
    assert planned.running == pytest.approx(running, rel=0.15)
