"""The parallel layouts the compiler emits, run with vLLM's CPU build under real Ray Serve.

Long (each starts Ray and one or more engines): marked `vllm_long`, run by hand with
`pytest -m vllm_long`. A layout the CPU build cannot run is a test of its exact failure, so the
day vLLM fixes it the test says so instead of a finding going stale.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from compiled_support import compile_spec
from repo import REPO

from serving.compile.patterns import llm_configs_of
from serving.local.bench.runner import Variant, VariantStartError, running_variant, variant_spec
from serving.local.runtime.local_ray import SESSION_PREFIX
from serving.spec.loading import load_profile
from serving.spec.profile import ModelSpec

pytestmark = [pytest.mark.vllm_long, pytest.mark.timeout(1800)]

MODELS = REPO / "stacks" / "models"
ONE = Variant(name="layout", fast_paths=True, router="power_of_two", workloads=(), replicas=1)


def one_replica(profile: str, **changes: object) -> ModelSpec:
    spec = variant_spec(load_profile(MODELS / f"{profile}.yaml"), ONE, 1)
    return ModelSpec.model_validate(spec.model_dump() | changes)


def chat(endpoint: str, model: str) -> dict[str, object]:
    body = {"model": model, "messages": [{"role": "user", "content": "Hi."}], "max_tokens": 5,
            "ignore_eos": True}  # fmt: skip
    response = httpx.post(f"{endpoint}/v1/chat/completions", json=body, timeout=120)
    response.raise_for_status()
    answer: dict[str, object] = response.json()
    return answer


def test_tensor_parallel_2_inside_one_replica(tmp_path: Path) -> None:
    spec = one_replica("qwen3-32b")  # TP=2, as compiled: 2 worker bundles, STRICT_PACK
    config = llm_configs_of(compile_spec(spec).application["args"])[0][1]
    assert config["engine_kwargs"]["tensor_parallel_size"] == 2
    assert config["placement_group_config"]["strategy"] == "STRICT_PACK"
    with running_variant(spec, None, tmp_path / "tp2.log", 900, engine="vllm") as endpoint:
        answer = chat(endpoint, spec.name)
    assert answer["usage"]["completion_tokens"] == 5  # type: ignore[index]


def test_a_tiny_moe_in_one_replica(tmp_path: Path) -> None:
    spec = one_replica("qwen3-30b-a3b", parallelism={"tensor": 1})
    with running_variant(spec, None, tmp_path / "moe.log", 900, engine="vllm") as endpoint:
        answer = chat(endpoint, spec.name)
    assert answer["usage"]["completion_tokens"] == 5  # type: ignore[index]


def test_data_and_expert_parallel_fail_in_the_cpu_communicator(tmp_path: Path) -> None:
    spec = one_replica("qwen3-30b-a3b", parallelism={"tensor": 1, "data": 2, "expert": True})
    assert compile_spec(spec).application["import_path"] == "ray.serve.llm:build_dp_openai_app"
    log = tmp_path / "dp.log"
    # Serve restarts the failing replicas every 3 minutes or so; one round shows the error.
    with (
        pytest.raises(VariantStartError),
        running_variant(spec, None, log, 420, engine="vllm"),
    ):
        pass
    assert "all_gatherv" in _ray_logs(log)


def test_prefill_decode_over_nixl(tmp_path: Path) -> None:
    profile = load_profile(MODELS / "llama-3.1-8b-pd.yaml").model_dump()
    for role in ("prefill", "decode"):
        profile["disaggregation"][role]["autoscaling"] = {"min_replicas": 1, "max_replicas": 1,
                                                          "target_ongoing_requests": 8}  # fmt: skip
    spec = ModelSpec.model_validate(profile)
    with running_variant(spec, None, tmp_path / "pd.log", 900, engine="vllm") as endpoint:
        answer = chat(endpoint, spec.name)
    assert answer["usage"]["completion_tokens"] == 5  # type: ignore[index]


def _ray_logs(log: Path) -> str:
    """The run's log and the logs of its own Ray session (the runtime names it in its log)."""
    text = log.read_text(errors="replace")
    sessions = [
        Path(line.removeprefix(SESSION_PREFIX))
        for line in text.splitlines()
        if line.startswith(SESSION_PREFIX)
    ]
    assert sessions, f"the run's log names no Ray session: {log}"
    return text + json.dumps(
        [p.read_text(errors="replace")[-20000:] for p in (sessions[-1] / "logs").rglob("*.log")]
    )
