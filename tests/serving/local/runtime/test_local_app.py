"""The local data plane without starting Ray: the application is the compiled one changed only
where the CPU demands it, the environment is the cluster's plus what a local run needs, and the
simulation's cache and timing follow the plan. The simulated engine answers the OpenAI API as
vLLM would, including its errors."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import pytest
from compiled_support import compile_spec
from local_support import simulated_engine
from repo import REPO

from serving.compile.patterns import llm_configs_of
from serving.local.bench import runner as bench
from serving.local.bench.stats import RequestResult, summarize
from serving.local.bench.workloads import build_requests, default_workloads
from serving.local.engine.simulation import (
    PrefixCache,
    SimulationSettings,
    StepLoop,
    chat_prompt,
    settings_from_plan,
    tokenize,
)
from serving.local.runtime.app import ENGINE_CLASS, local_application, local_env
from serving.plan.placement import choose_machine
from serving.plan.planner import plan, prefill_s
from serving.spec.loading import load_profile
from serving.spec.profile import ModelSpec

PROFILES = sorted((REPO / "stacks" / "models").glob("*.yaml"))
LLAMA = REPO / "stacks" / "models" / "llama-3.1-8b.yaml"


def llm_configs(app: dict[str, Any]) -> list[dict[str, Any]]:
    return [config for _, config in llm_configs_of(app["args"])]


@pytest.fixture(scope="module")
def llama() -> ModelSpec:
    return load_profile(LLAMA)


class TestLocalApplication:
    """What the RayService gets, changed only where a CPU demands it."""

    @pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.stem)
    def test_only_gpu_settings_change(self, profile: Path) -> None:
        spec = load_profile(profile)
        compiled, local = compile_spec(spec).application, local_application(compile_spec(spec))
        assert {k: v for k, v in local.items() if k != "args"} == {
            k: v for k, v in compiled.items() if k != "args"
        }
        for ours, theirs in zip(llm_configs(local), llm_configs(compiled), strict=True):
            assert "accelerator_type" not in ours
            assert ours["accelerator_config"] == {"kind": "cpu"}
            bundle = theirs["placement_group_config"]["bundle_per_worker"]
            assert ours["placement_group_config"]["bundle_per_worker"] == {
                k: v for k, v in bundle.items() if k != "GPU"
            }
            unchanged = copy.deepcopy(theirs)
            unchanged.pop("accelerator_type")
            unchanged.pop("placement_group_config")
            assert {
                k: v
                for k, v in ours.items()
                if k not in ("accelerator_config", "placement_group_config")
            } == unchanged

    @pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.stem)
    def test_no_gpu_is_asked_for(self, profile: Path) -> None:
        assert '"GPU"' not in json.dumps(local_application(compile_spec(load_profile(profile))))

    def test_environment_is_the_clusters_plus_the_local_needs(self, llama: ModelSpec) -> None:
        settings = settings_from_plan(llama)
        env = local_env(compile_spec(llama), settings)
        assert compile_spec(llama).cluster_env.items() <= env.items()
        assert env["RAYLLM_VLLM_ENGINE_CLS"] == ENGINE_CLASS
        assert env["RAY_SERVE_EXPERIMENTAL_PIP_HAPROXY"] == "1"
        # HAProxy needs about 2.5 file descriptors per connection.
        assert int(env["RAY_SERVE_HAPROXY_MAXCONN"]) * 2.5 < 20_000
        assert SimulationSettings.from_env(env) == settings

    def test_engine_class_names_the_simulated_engine(self) -> None:
        from serving.local.engine.simulated import SimulatedEngine

        module, _, name = ENGINE_CLASS.partition(":")
        assert f"{SimulatedEngine.__module__}:{SimulatedEngine.__name__}" == f"{module}:{name}"


class TestSimulation:
    def test_timing_and_cache_come_from_the_plan(self, llama: ModelSpec) -> None:
        settings = settings_from_plan(llama)
        group = plan(llama).groups[0]
        machine = choose_machine(llama, group.parallelism.gpus_per_replica)
        chunk = llama.max_num_batched_tokens
        assert settings.prefill_s_per_token == pytest.approx(
            prefill_s(llama, machine, group.parallelism, chunk) / chunk
        )
        assert settings.cache_tokens == group.memory.kv_capacity_tokens
        assert settings.decode_step_s == pytest.approx(group.estimates.itl_s)

    def test_flags_override_cache_and_scale_time(self, llama: ModelSpec) -> None:
        settings = settings_from_plan(llama, time_scale=0.5, cache_tokens=1000)
        assert settings.cache_tokens == 1000
        assert settings.prefill(100) == pytest.approx(50 * settings.prefill_s_per_token)
        assert settings.decode_step(1) == pytest.approx(0.5 * settings.decode_step_s)

    def test_decode_step_grows_with_running_sequences(self, llama: ModelSpec) -> None:
        settings = settings_from_plan(llama)
        assert settings.decode_step(64) > settings.decode_step(1)

    def test_settings_carry_the_profiles_step_budget(self, llama: ModelSpec) -> None:
        settings = settings_from_plan(llama)
        assert settings.max_num_batched_tokens == llama.max_num_batched_tokens
        assert settings.max_num_seqs == llama.max_num_seqs

    def test_cache_hits_the_shared_prefix_in_whole_blocks(self) -> None:
        cache = PrefixCache(capacity_tokens=1000, block_tokens=16)
        system = [f"s{i}" for i in range(40)]
        assert cache.admit([*system, "a", "b"]) == 0
        assert cache.admit([*system, "c", "d"]) == 32  # two full blocks of 40 shared words

    def test_cache_evicts_least_recently_used(self) -> None:
        cache = PrefixCache(capacity_tokens=64, block_tokens=16)  # four blocks
        first, second = [f"a{i}" for i in range(32)], [f"b{i}" for i in range(32)]
        cache.admit(first)
        cache.admit(second)
        assert cache.admit(first) == 32  # touched: now most recent
        cache.admit([f"c{i}" for i in range(32)])  # evicts second, the least recent
        assert cache.admit(second) == 0
        assert len(cache) == 4

    def test_chat_prompt_counts_words_of_every_message(self) -> None:
        prompt = chat_prompt(
            [{"role": "system", "content": "one two"}, {"role": "user", "content": "three"}]
        )
        assert len(tokenize(prompt)) == 3 + 3  # plus one role marker per message and the reply's


def step_settings(
    llama: ModelSpec, budget: int = 2048, max_num_seqs: int = 8
) -> SimulationSettings:
    """The plan's timing, shrunk a thousandfold so the loop runs in milliseconds."""
    return settings_from_plan(llama, time_scale=1e-3).model_copy(
        update={"max_num_batched_tokens": budget, "max_num_seqs": max_num_seqs}
    )


async def _tokens(loop: StepLoop, uncached: int, max_tokens: int) -> list[tuple[int, int]]:
    """(token index, engine steps taken when it arrived) for one request."""
    return [(index, loop.steps) async for index in loop.generate(uncached, max_tokens)]


class TestStepLoop:
    """Continuous batching with chunked prefill: what a replica's engine steps cost."""

    def test_a_long_prompt_is_prefilled_in_chunks_of_the_budget(self, llama: ModelSpec) -> None:
        loop = StepLoop(step_settings(llama, budget=2048))
        arrivals = asyncio.run(_tokens(loop, uncached=5000, max_tokens=4))
        # ceil(5000 / 2048) = 3 prefill steps, the last of which yields the first token
        assert arrivals == [(0, 3), (1, 4), (2, 5), (3, 6)]

    def test_a_prefill_slows_the_sequences_decoding_beside_it(self, llama: ModelSpec) -> None:
        settings = step_settings(llama, budget=8192)

        async def decode_alone() -> float:
            loop = StepLoop(settings)
            await _tokens(loop, uncached=16, max_tokens=20)
            return loop.simulated_s

        async def decode_beside_a_prompt() -> float:
            loop = StepLoop(settings)
            decoding = asyncio.ensure_future(_tokens(loop, uncached=16, max_tokens=20))
            while loop.steps < 2:
                await asyncio.sleep(0)
            await asyncio.gather(decoding, _tokens(loop, uncached=4000, max_tokens=1))
            return loop.simulated_s

        alone, beside = asyncio.run(decode_alone()), asyncio.run(decode_beside_a_prompt())
        # the 4,000-token prompt rode in one step with the decoding sequence: that step (and so
        # the whole sequence) took the prompt's prefill time longer, and nothing else changed
        assert beside == pytest.approx(alone + settings.prefill(4000))

    def test_no_more_than_max_num_seqs_are_scheduled(self, llama: ModelSpec) -> None:
        loop = StepLoop(step_settings(llama, max_num_seqs=1))

        async def two() -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
            return await asyncio.gather(_tokens(loop, 16, 5), _tokens(loop, 16, 5))

        first, second = asyncio.run(two())
        assert second[0][1] > first[-1][1]  # the second waited for the first to finish
        assert loop.running == 0

    def test_an_abandoned_request_leaves_the_batch(self, llama: ModelSpec) -> None:
        loop = StepLoop(step_settings(llama))

        async def abandon() -> None:
            stream = loop.generate(16, 1000)
            await anext(stream)
            await stream.aclose()
            await _tokens(loop, 16, 3)

        asyncio.run(abandon())
        assert loop.steps < 1000


def run(coro: Any) -> Any:
    return asyncio.run(coro)


class TestSimulatedEngine:
    """The engine outside Serve: its API shapes and errors."""

    @pytest.fixture
    def engine(self, llama: ModelSpec, monkeypatch: pytest.MonkeyPatch) -> Any:
        return simulated_engine(llama, monkeypatch)

    async def _collect(self, stream: Any) -> list[Any]:
        return [item async for item in stream]

    def test_streamed_chat_is_ordered_and_reports_cache_hits(self, engine: Any) -> None:
        from ray.llm._internal.serve.core.configs.openai_api_models import ChatCompletionRequest

        system = " ".join(f"s{i}" for i in range(64))
        body = {
            "model": "llama-3.1-8b",
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": "q"}],
            "max_tokens": 5,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        run(self._collect(engine.chat(ChatCompletionRequest(**body))))
        events = run(self._collect(engine.chat(ChatCompletionRequest(**body))))
        assert events[-1] == "data: [DONE]\n\n"
        chunks = [json.loads(e.removeprefix("data: ")) for e in events[:-1]]
        words = [c["choices"][0]["delta"].get("content") for c in chunks if c["choices"]]
        assert "".join(w for w in words if w) == " w0 w1 w2 w3 w4"
        usage = chunks[-1]["usage"]
        assert usage["completion_tokens"] == 5
        assert usage["prompt_tokens_details"]["cached_tokens"] == 64  # the system prompt's blocks
        assert {c["system_fingerprint"] for c in chunks} == {engine.fingerprint}

    def test_too_long_a_request_is_refused_like_vllm(self, engine: Any, llama: ModelSpec) -> None:
        from ray.llm._internal.serve.core.configs.openai_api_models import (
            CompletionRequest,
            ErrorResponse,
        )

        request = CompletionRequest(model=llama.name, prompt="hi", max_tokens=llama.max_model_len)
        (error,) = run(self._collect(engine.completions(request)))
        assert isinstance(error, ErrorResponse)
        assert error.error.code == 400
        assert f"maximum context length is {llama.max_model_len}" in error.error.message

    def test_unknown_model_is_not_found(self, engine: Any) -> None:
        from ray.llm._internal.serve.core.configs.openai_api_models import CompletionRequest

        (error,) = run(
            self._collect(engine.completions(CompletionRequest(model="gpt", prompt="x")))
        )
        assert error.error.code == 404


class TestBenchmarkRequests:
    def test_every_configuration_gets_the_same_requests(self) -> None:
        workload = default_workloads(requests=8, shared_prefixes=4)["multi-prompt"]
        assert build_requests(workload, "m") == build_requests(workload, "m")

    def test_shared_prefixes_are_asked_equally_often(self) -> None:
        workload = default_workloads(requests=8, shared_prefixes=4)["multi-prompt"]
        requests = build_requests(workload, "m")
        systems = [r["messages"][0]["content"] for r in requests]
        assert len(requests) == workload.requests
        assert sorted({systems.count(s) for s in systems}) == [workload.requests // 4]
        assert all(len(s.split()) == workload.prefix_tokens for s in systems)

    def test_the_hot_prompt_takes_its_share_and_the_rest_share_the_others(self) -> None:
        workload = default_workloads(requests=16, shared_prefixes=4, hot_share=0.5)["hot-prompt"]
        systems = [r["messages"][0]["content"] for r in build_requests(workload, "m")]
        counts = sorted((systems.count(s) for s in set(systems)), reverse=True)
        assert counts == [16, 6, 5, 5]  # 32 requests: half on the hot one, 16 over the other 3

    @pytest.mark.parametrize(("name", "words"), [("decode-heavy", 50), ("prefill-heavy", 8000)])
    def test_unique_prompts_have_the_workloads_length(self, name: str, words: int) -> None:
        workload = default_workloads(requests=2)[name]  # type: ignore[index]
        (first, second) = build_requests(workload, "m")
        assert len(first["messages"][0]["content"].split()) == words
        assert first["messages"] != second["messages"]
        assert first["max_tokens"] == workload.output_tokens

    def test_variants_change_only_fast_paths_router_and_replicas(self, llama: ModelSpec) -> None:
        variants = {v.name: v for v in bench.default_variants(llama)}
        off = variants["fast-paths-off/power-of-two"]
        ours = variants["fast-paths-on/servestack-prefix-affinity"]
        slow = bench.variant_spec(llama, off, replicas=3)
        assert set(compile_spec(slow).cluster_env.values()) == {"0"}
        assert slow.router.kind == "power_of_two"
        assert slow.autoscaling.min_replicas == slow.autoscaling.max_replicas == 3
        # The profile's own router (with its tuning) is kept where the variant names its kind.
        routed = bench.variant_spec(llama, ours, replicas=2)
        assert routed.router == llama.router
        assert routed.fast_paths == llama.fast_paths
        untouched = {"fast_paths", "router", "autoscaling"}
        assert slow.model_dump(exclude=untouched) == llama.model_dump(exclude=untouched)

    def test_summary_hit_rate_and_replica_counts(self) -> None:
        results = [
            RequestResult(
                ok=True, start_s=0, end_s=1, ttft_s=0.1, token_gaps_s=[0.01, 0.02],
                output_tokens=3, prompt_tokens=100, cached_tokens=cached, replica=replica,
            )
            for cached, replica in ((0, "a"), (80, "a"), (100, "b"))
        ] + [RequestResult(ok=False, error="HTTP 500", start_s=0, end_s=1)]  # fmt: skip
        report = summarize("v", "multi-prompt", results, duration_s=2.0, replicas=2)
        assert report.cache_hit_rate == pytest.approx(180 / 300)
        assert report.requests_per_replica == {"a": 2, "b": 1}
        assert report.busiest_over_idlest == pytest.approx(2.0)
        # a third replica that served nothing makes the spread unbounded
        assert summarize("v", "multi-prompt", results, 2.0, replicas=3).busiest_over_idlest is None
        assert report.failed == 1
        assert report.requests_per_s == pytest.approx(1.5)
        assert report.output_tokens_per_s == pytest.approx(4.5)
