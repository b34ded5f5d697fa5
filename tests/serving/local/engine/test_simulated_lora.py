"""LoRA adapters in the simulated engine and the bench that compares routers on them: the worker's
adapter cache as vLLM 0.22 keeps it, the scheduler's max_loras rule, the load each step pays, the
engine's API for adapters, and the bench's adapter workload, baseline and figures. Ray is not
started here (the bench's run is tests/serving/local/bench/test_local_lora_bench.py)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from compiled_support import compile_spec
from local_support import simulated_engine
from repo import REPO

from serving.errors import ServestackError
from serving.local.bench import runner as bench
from serving.local.bench import stats
from serving.local.bench.metrics import ADAPTER_LOADS, EngineFigures, engine_figures
from serving.local.bench.stats import RequestResult, summarize
from serving.local.bench.workloads import ADAPTER_WORKLOAD, build_requests, chosen_workloads
from serving.local.engine.adapter_cache import AdapterCache
from serving.local.engine.simulation import (
    SimulationSettings,
    StepLoop,
    settings_from_plan,
)
from serving.local.runtime.app import local_application
from serving.local.runtime.local_ray import refusal
from serving.observability import top
from serving.observability.metrics import engine as engine_metric
from serving.plan import lora as lora_plan
from serving.plan.planner import plan
from serving.spec.loading import load_profile
from serving.spec.profile import ModelSpec

LORA = REPO / "stacks/models/llama-3.1-8b-lora.yaml"


@pytest.fixture(scope="module")
def lora() -> ModelSpec:
    return load_profile(LORA)


def quick(**update: Any) -> SimulationSettings:
    """Steps of 1 ms, a prompt token 0.01 ms, a load 50 ms, the LoRA kernels 2 ms."""
    base = SimulationSettings(
        prefill_s_per_token=1e-5, decode_step_s=1e-3, decode_s_per_sequence=0.0,
        cache_tokens=0, max_num_batched_tokens=2048, max_num_seqs=8,
        adapter_load_s=0.05, lora_step_s=0.002,
    )  # fmt: skip
    return base.model_copy(update=update)


class TestAdapterCache:
    def test_loads_once_and_evicts_the_least_recently_used(self) -> None:
        cache = AdapterCache(gpu_slots=1, cpu_slots=2)
        loaded: list[str] = []
        cache.on_load = loaded.append
        assert cache.apply(["a"]) == 1
        assert cache.apply(["b", "b"]) == 1  # one load however many sequences ask
        assert cache.apply(["a"]) == 0  # held: touched, now the most recent
        assert cache.apply(["c"]) == 1  # evicts b, the least recently used
        assert cache.loaded() == ["a", "c"]
        assert cache.apply(["b"]) == 1  # b was evicted: loaded again
        assert (cache.loads, loaded) == (4, ["a", "b", "c", "b"])

    def test_cpu_cache_holds_at_least_the_gpu_slots(self) -> None:
        assert AdapterCache(gpu_slots=3, cpu_slots=1).cpu_slots == 3
        with pytest.raises(ValueError, match="max_loras"):
            AdapterCache(gpu_slots=0, cpu_slots=1)


async def _arrivals(loop: StepLoop, adapter: str | None, tokens: int = 3) -> list[int]:
    """The engine step on which each of a request's tokens arrived."""
    return [loop.steps async for _ in loop.generate(16, tokens, adapter)]


class TestStepLoop:
    def test_an_adapter_beyond_max_loras_waits_for_the_batch_to_free_a_slot(self) -> None:
        loop = StepLoop(quick(), AdapterCache(gpu_slots=1, cpu_slots=4))

        async def three() -> list[list[int]]:
            return list(
                await asyncio.gather(
                    _arrivals(loop, "a"), _arrivals(loop, "b"), _arrivals(loop, "a")
                )
            )

        first_a, b, second_a = asyncio.run(three())
        # the second 'a' joins the first in the batch; 'b' waits until neither runs
        assert first_a == second_a == [1, 2, 3]
        assert b[0] > first_a[-1]

    def test_a_load_holds_up_the_whole_step_once(self) -> None:
        settings = quick()

        async def steps(adapter: str | None, cache: AdapterCache | None) -> float:
            loop = StepLoop(settings, cache)
            await _arrivals(loop, adapter, tokens=4)
            await _arrivals(loop, adapter, tokens=4)  # the adapter is held the second time
            return loop.simulated_s

        base = asyncio.run(steps(None, None))
        with_adapter = asyncio.run(steps("a", AdapterCache(1, 1)))
        # 8 steps, each with the LoRA kernels' 2 ms, and one load of 50 ms
        assert with_adapter == pytest.approx(base + 8 * 0.002 + 0.05)

    def test_a_replica_without_adapters_refuses_one(self) -> None:
        with pytest.raises(ValueError, match="serves no adapters"):
            asyncio.run(_arrivals(StepLoop(quick()), "a"))


class TestSettings:
    def test_a_loras_load_and_kernel_time_come_from_its_plan(self, lora: ModelSpec) -> None:
        settings = settings_from_plan(lora, time_scale=0.5)
        group = plan(lora).groups[0]
        assert group.lora is not None
        # the larger adapter (rank 16) read at one gcsfuse reader's share: 68.75 ms
        assert settings.adapter_load_s == group.lora.load_s == lora_plan.adapter_load_s(lora, 16)
        assert settings.lora_step_s == lora_plan.LORA_DECODE_STEP_S
        assert settings.step(0, 0, adapter_loads=2, lora=True) == pytest.approx(
            0.5 * (2 * settings.adapter_load_s + settings.lora_step_s)
        )


def run(coro: Any) -> Any:
    return asyncio.run(coro)


class TestSimulatedEngine:
    @pytest.fixture
    def engine(self, lora: ModelSpec, monkeypatch: pytest.MonkeyPatch) -> Any:
        return simulated_engine(lora, monkeypatch)

    def test_lists_and_serves_the_compiled_adapters_and_counts_loads(self, engine: Any) -> None:
        from fastapi.testclient import TestClient

        client = TestClient(run(engine.build_asgi_app()))
        listed = [card["id"] for card in client.get("/v1/models").json()["data"]]
        assert listed == [
            "llama-3.1-8b-lora", "llama-3.1-8b-lora:sql-expert", "llama-3.1-8b-lora:support-tone"
        ]  # fmt: skip
        for model in ("llama-3.1-8b-lora:sql-expert", "llama-3.1-8b-lora", "llama-3.1-8b-lora"):
            body = {"model": model, "prompt": "one two", "max_tokens": 2}
            answer = client.post("/v1/completions", json=body)
            assert answer.status_code == 200
            assert answer.json()["model"] == model  # vLLM names the adapter that answered
        assert engine.steps.adapters.loads == 1  # the base model loads nothing
        # max_loras 2 and max_cpu_loras 4 from the profile, as vLLM reads them
        assert (engine.steps.adapters.gpu_slots, engine.steps.adapters.cpu_slots) == (2, 4)
        unknown = {"model": "llama-3.1-8b-lora:nope", "prompt": "x", "max_tokens": 1}
        refused = client.post("/v1/completions", json=unknown)
        assert refused.status_code == 404
        assert "llama-3.1-8b-lora:sql-expert" in refused.json()["error"]["message"]

    def test_off_direct_streaming_a_local_run_refuses_adapters(self, lora: ModelSpec) -> None:
        from serving.local.runtime.lora import LocalLoraError

        data = lora.model_dump() | {"fast_paths": {"direct_streaming": False}}
        off = ModelSpec.model_validate(data)
        with pytest.raises(LocalLoraError, match="direct streaming"):
            local_application(compile_spec(off))


class TestBench:
    def test_the_adapter_workload_names_adapters_the_bench_profile_serves(
        self, lora: ModelSpec
    ) -> None:
        workloads = chosen_workloads((), 24, 12, 4, 2000, 0.5, adapters=8)
        (workload,) = workloads.values()
        assert (workload.name, workload.adapters, workload.requests) == (ADAPTER_WORKLOAD, 8, 48)
        served = bench.adapter_bench_spec(lora, 8)
        assert served.lora is not None and lora.lora is not None
        assert [a.name for a in served.lora.adapters] == [f"a{i}" for i in range(8)]
        assert {a.rank for a in served.lora.adapters} == {16}  # the first adapter's
        assert served.lora.adapters[3].source == (
            "gs://servestack-example-models/llama-3.1-8b-adapters/a3"
        )
        assert (served.lora.max_loras, served.lora.cpu_loras) == (2, 4)  # the profile's slots
        asked = {r["model"] for r in build_requests(workload, served.name)}
        assert asked == {f"llama-3.1-8b-lora:a{i}" for i in range(8)}

    @pytest.mark.parametrize(
        ("names", "adapters", "fix"),
        [
            (("decode-heavy",), 8, "runs --workload many-adapters"),
            ((ADAPTER_WORKLOAD,), 0, "a profile with a lora: section"),
        ],
    )
    def test_a_workload_the_profile_cannot_run_is_refused_with_the_fix(
        self, names: tuple[str, ...], adapters: int, fix: str
    ) -> None:
        with pytest.raises(ServestackError, match=fix) as caught:
            chosen_workloads(names, 24, 12, 4, 2000, 0.5, adapters=adapters)
        assert caught.value.field == "--workload"

    def test_power_of_two_runs_as_a_baseline_only_by_accepting_its_verdict(
        self, lora: ModelSpec
    ) -> None:
        aware, blind = bench.default_variants(lora)
        assert (aware.router, aware.accepts) == ("servestack_prefix_affinity", ())
        assert (blind.router, blind.accepts) == ("power_of_two", ("lora-routing",))
        blind_plan = plan(bench.variant_spec(lora, blind, 2))
        refused = refusal(blind_plan)
        assert refused is not None and "[lora-routing]" in refused
        assert refusal(blind_plan, blind.accepts) is None
        assert refusal(plan(bench.variant_spec(lora, aware, 2))) is None

    def test_loads_per_request_come_from_the_engines_counter(self) -> None:
        def snapshot(done: float, loads: float | None) -> top.Snapshot:
            model = (("model_name", "m"),)
            samples = {(engine_metric("vllm:request_success"), model): done}
            if loads is not None:
                samples[(ADAPTER_LOADS.scraped, (*model, ("replica", "r1")))] = loads
            return top.Snapshot(0.0, samples)

        figures = engine_figures(snapshot(4, None), snapshot(14, 3), "m")
        assert figures is not None and figures.adapter_loads == 3
        results = [RequestResult(ok=True, start_s=0, end_s=1, replica="r1") for _ in range(10)]
        report = summarize("fast-paths-on/power-of-two", ADAPTER_WORKLOAD, results, 1.0, 1, figures)
        assert report.adapter_loads_per_request == pytest.approx(0.3)
        aware = report.model_copy(
            update={"variant": stats.ADAPTER_AWARE, "adapter_loads_per_request": 0.1}
        )
        found = stats.ratios([report, aware])
        assert found[f"{ADAPTER_WORKLOAD}: power of two adapter loads per request"] == 0.3
        assert found[f"{ADAPTER_WORKLOAD}: adapter-aware adapter loads per request"] == 0.1
        assert found[f"{ADAPTER_WORKLOAD}: adapter-aware/power of two, requests/s"] == 1.0

    def test_no_adapters_no_load_figure(self) -> None:
        figures = EngineFigures(
            requests=1, prefix_hit_rate=None, queue_p99_s=None, ttft_p50_s=None, ttft_p99_s=None
        )
        report = summarize("v", "decode-heavy", [RequestResult(ok=True, start_s=0, end_s=1)], 1.0,
                           1, figures)  # fmt: skip
        assert report.adapter_loads_per_request is None
        assert json.loads(report.model_dump_json())["adapter_loads_per_request"] is None
