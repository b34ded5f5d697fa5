"""What LoRA adapters cost a replica, each term worked by hand from Llama 3.1 8B's shapes (hidden
4096, 32 query and 8 KV heads of 128, intermediate 14336, 32 layers, vocabulary 128256) and
vLLM 0.22's LoRA layout (serving/plan/lora.py's docstring): GPU slots, CPU memory, the KV cache
they take, the decode cost (Punica's 2 ms a step) and the routing verdict."""

from __future__ import annotations

from typing import Any

import pytest
from planner_support import codes, spec

from serving.plan import lora
from serving.plan.memory import memory
from serving.plan.planner import plan
from serving.spec.parts import Parallelism
from serving.spec.profile import ModelSpec

# Llama 3.1 8B, worked by hand at rank r, TP=1, per layer (A + B of each module):
#   qkv_proj      3*r*4096 + (4096 + 2*1024)*r = 18432 r
#   o_proj        r*4096 + 4096*r              =  8192 r
#   gate_up_proj  2*r*4096 + 2*14336*r         = 36864 r
#   down_proj     r*14336 + 4096*r             = 18432 r
#   a layer                                    = 81920 r; 32 layers: 2,621,440 r
#   embeddings (128256 r + 4096 r) and LM head (4096 r + 128256 r): 264,704 r
PER_RANK_TP1 = 2_621_440 + 264_704
# At TP=2: q 2048, kv 1024 (4 KV heads a rank), intermediate 7168 per rank:
#   qkv 3*4096 + 2048 + 2*512 = 15360, o 2048 + 4096 = 6144, gate_up 8192 + 14336 = 22528,
#   down 7168 + 4096 = 11264: 55296 a layer, 1,769,472 for 32; the once-terms stay whole.
PER_RANK_TP2 = 1_769_472 + 264_704
# At TP=16, past the 8 KV heads: each rank holds one whole KV head (128), not half of one:
#   qkv 3*4096 + 256 + 2*128 = 12800, o 256 + 4096, gate_up 8192 + 2*896, down 896 + 4096.
PER_RANK_TP16 = 32 * (12800 + 4352 + 9984 + 4992) + 264_704


def lora_spec(*ranks: int, **settings: Any) -> ModelSpec:
    adapters = [
        {"name": f"a{i}", "source": f"gs://wts/adapters/a{i}", "rank": rank}
        for i, rank in enumerate(ranks or (16,))
    ]
    return spec(source="gs://wts/base", lora={"adapters": adapters, **settings})


class TestGpuSlots:
    def test_one_slot_at_rank_16_on_one_gpu(self) -> None:
        assert lora.weights_per_slot(lora_spec(), 16) == 16 * PER_RANK_TP1 == 46_178_304

    def test_tensor_parallelism_shards_b_of_column_and_a_of_row_layers(self) -> None:
        assert lora.weights_per_slot(lora_spec(), 16, tensor=2) == 16 * PER_RANK_TP2

    def test_kv_heads_replicated_past_their_count(self) -> None:
        assert lora.weights_per_slot(lora_spec(), 8, tensor=16) == 8 * PER_RANK_TP16

    def test_pipeline_stages_hold_their_share_of_the_layers(self) -> None:
        # 32 layers over 3 stages: the first holds 11.
        expected = 11 * 81920 * 16 + 264_704 * 16
        assert lora.weights_per_slot(lora_spec(), 16, pipeline=3) == expected

    def test_vllm_preallocates_max_loras_slots_at_max_lora_rank_in_bf16(self) -> None:
        """Two adapters of ranks 8 and 4 still take max_loras slots at max_lora_rank 32."""
        model = lora_spec(8, 4, max_loras=3, max_lora_rank=32)
        assert lora.gpu_bytes(model, Parallelism()) == 3 * 32 * PER_RANK_TP1 * 2

    def test_no_adapters_no_slots(self) -> None:
        assert lora.gpu_bytes(spec(), Parallelism()) == 0


class TestCpuMemory:
    def test_the_largest_max_cpu_loras_adapters_each_whole_at_its_own_rank(self) -> None:
        model = lora_spec(8, 16, 4, max_loras=1, max_cpu_loras=2)
        assert lora.cpu_bytes_per_worker(model) == (16 + 8) * PER_RANK_TP1 * 2

    def test_all_adapters_when_cpu_holds_them_all(self) -> None:
        model = lora_spec(8, 16, max_cpu_loras=4)
        assert lora.cpu_bytes_per_worker(model) == (16 + 8) * PER_RANK_TP1 * 2
        held = lora.lora_plan(model, Parallelism())
        assert held is not None and held.all_adapters_resident


class TestLoadTime:
    def test_a_load_reads_the_whole_adapter_at_one_gcsfuse_readers_share(self) -> None:
        """Rank 16: 46,178,304 weights, 92,356,608 bytes in BF16; one of gcsfuse's 10 fio jobs
        read 1,343.34 MB/s; so 68.75 ms, and the plan names the largest adapter's."""
        assert lora.adapter_bytes(lora_spec(), 16) == 92_356_608
        assert lora.adapter_load_s(lora_spec(), 16) == pytest.approx(0.068752, rel=1e-4)
        held = lora.lora_plan(lora_spec(8, 16), Parallelism(tensor=2))
        assert held is not None and held.load_s == pytest.approx(0.068752, rel=1e-4)


class TestKvCache:
    def test_the_slots_come_out_of_the_kv_cache(self) -> None:
        base = memory(spec(source="gs://wts/base"), Parallelism())
        with_adapters = memory(lora_spec(max_loras=4, max_lora_rank=64), Parallelism())
        slots = 4 * 64 * PER_RANK_TP1 * 2
        assert with_adapters.lora_bytes == slots
        assert base.kv_cache_bytes - with_adapters.kv_cache_bytes == slots
        assert with_adapters.kv_cache_blocks < base.kv_cache_blocks


class TestDecodeCost:
    def test_each_step_pays_punicas_2_ms_and_throughput_falls_by_that_share(self) -> None:
        base = plan(spec(source="gs://wts/base")).groups[0].estimates
        group = plan(lora_spec()).groups[0]
        est = group.estimates
        assert group.lora is not None and group.lora.decode_step_overhead_s == 0.002
        assert lora.applied(est, None) == est
        # At batch 1 a step reads the weights and one sequence's KV: the slots change neither.
        assert est.itl_s == pytest.approx(base.itl_s + 0.002, rel=1e-3)

    def test_applied_adds_the_step_and_scales_throughput(self) -> None:
        group = plan(spec(source="gs://wts/base")).groups[0]
        adapters = lora.lora_plan(lora_spec(), Parallelism())
        est = group.estimates
        after = lora.applied(est, adapters)
        share = est.itl_at_batch_s / (est.itl_at_batch_s + 0.002)
        assert after.itl_at_batch_s == est.itl_at_batch_s + 0.002
        assert after.ttft_s == est.ttft_s + 0.002
        assert after.requests_per_s == pytest.approx(est.requests_per_s * share)
        assert after.output_tokens_per_s == pytest.approx(est.output_tokens_per_s * share)

    def test_a_plan_without_adapters_is_unchanged(self) -> None:
        assert plan(spec()).groups[0].lora is None


class TestRouting:
    @pytest.mark.parametrize("router", ["prefix_affinity", "power_of_two", "round_robin"])
    def test_rays_routers_behind_direct_streaming_cannot_see_the_adapter(self, router: str) -> None:
        model = spec(
            source="gs://wts/base",
            router=router,
            lora={"adapters": [{"name": "a", "source": "gs://wts/adapters/a", "rank": 8}]},
        )
        verdict = next(v for v in plan(model).verdicts if v.code == "lora-routing")
        assert verdict.severity == "error" and verdict.field == "router"
        assert f"with the {router} router" in verdict.message
        assert not plan(model).ok

    @pytest.mark.parametrize("router", ["servestack_prefix_affinity", "servestack_precise_prefix"])
    def test_servestacks_routers_read_the_adapter(self, router: str) -> None:
        model = spec(
            source="gs://wts/base",
            router=router,
            lora={"adapters": [{"name": "a", "source": "gs://wts/adapters/a", "rank": 8}]},
        )
        assert "lora-routing" not in codes(plan(model))

    def test_without_direct_streaming_serves_ingress_names_the_adapter(self) -> None:
        model = spec(
            source="gs://wts/base",
            router="power_of_two",
            fast_paths={"direct_streaming": False},
            lora={"adapters": [{"name": "a", "source": "gs://wts/adapters/a", "rank": 8}]},
        )
        assert "lora-routing" not in codes(plan(model))
