"""The capacity planner, against expectations computed by hand from the catalog's figures."""

from __future__ import annotations

import pytest
from planner_support import codes, spec

from serving.catalog import ACCELERATORS, ARCHITECTURES, MACHINE_TYPES
from serving.plan.planner import (
    activation_bytes_per_gpu,
    kv_bytes_per_token,
    kv_bytes_per_token_per_gpu,
    plan,
    weight_bytes_per_gpu,
)
from serving.plan.rules import smallest_layout
from serving.spec.parts import Parallelism


class TestMemory:
    """Weights, KV cache and what is left, per GPU."""

    def test_llama_3_1_8b_bf16_needs_131072_kv_bytes_per_token(self) -> None:
        # 2 (K and V) x 32 layers x 8 KV heads x 128 head dim x 2 bytes
        assert kv_bytes_per_token(spec()) == 2 * 32 * 8 * 128 * 2 == 131_072

    def test_llama_3_1_8b_bf16_fits_one_h100_at_full_context(self) -> None:
        model_plan = plan(spec(max_model_len=131072))
        group = model_plan.groups[0]
        assert group.memory.fits
        assert group.placement.gpus_per_replica == 1
        assert group.placement.machine_type == "a3-highgpu-1g"
        assert model_plan.ok

    def test_fp8_kv_cache_halves_bytes_per_token(self) -> None:
        assert kv_bytes_per_token(spec(kv_cache_dtype="fp8")) == 65_536

    def test_mla_caches_one_latent_per_token(self) -> None:
        # DeepSeek-V3: 61 layers x (512 compressed KV + 64 RoPE key) x 2 bytes
        deepseek = spec(architecture="deepseek-v3", accelerator="h200-141gb")
        assert kv_bytes_per_token(deepseek) == 61 * (512 + 64) * 2 == 70_272
        # ...replicated on every tensor-parallel rank, not split
        assert kv_bytes_per_token_per_gpu(deepseek, Parallelism(tensor=8)) == 70_272

    def test_gqa_kv_heads_split_over_tp_then_replicate(self) -> None:
        llama = spec()
        assert kv_bytes_per_token_per_gpu(llama, Parallelism(tensor=2)) == 131_072 // 2
        assert kv_bytes_per_token_per_gpu(llama, Parallelism(tensor=8)) == 131_072 // 8
        # 16 ranks share 8 KV heads: each still holds one whole head
        assert kv_bytes_per_token_per_gpu(llama, Parallelism(tensor=16)) == 131_072 // 8

    def test_pipeline_stages_split_layers(self) -> None:
        assert kv_bytes_per_token_per_gpu(spec(), Parallelism(pipeline=2)) == 131_072 // 2

    def test_bf16_weights_are_two_bytes_per_parameter(self) -> None:
        assert weight_bytes_per_gpu(spec(), Parallelism()) == pytest.approx(8.03e9 * 2)

    def test_fp8_keeps_embeddings_in_bf16(self) -> None:
        arch = ARCHITECTURES["llama-3.3-70b"]
        embeddings = 2 * 128256 * 8192
        expected = (embeddings * 2 + (arch.total_params - embeddings) * 1) / 2
        fp8 = spec(architecture="llama-3.3-70b", quantization="fp8")
        assert weight_bytes_per_gpu(fp8, Parallelism(tensor=2)) == pytest.approx(expected)

    def test_expert_parallel_shards_experts_over_dp_times_tp(self) -> None:
        qwen = spec(architecture="qwen3-30b-a3b")
        arch = qwen.architecture
        experts = (30.5e9 - 3.3e9) / (128 - 8) * 128  # per-expert size x expert count
        embeddings = 2 * 151936 * 2048
        dense = arch.total_params - experts
        layout = Parallelism(tensor=1, data=8, expert=True)
        assert layout.expert_parallel_size == 8
        assert weight_bytes_per_gpu(qwen, layout) == pytest.approx(
            dense * 2 + experts * 2 / 8, rel=1e-9
        )
        assert arch.expert_params == pytest.approx(experts)
        assert arch.embedding_params == embeddings

    def test_kv_capacity_is_what_weights_activations_and_overhead_leave(self) -> None:
        group = plan(spec()).groups[0]
        memory = group.memory
        usable = int(ACCELERATORS["h100-80gb"].memory_bytes * 0.9)
        assert memory.usable_bytes == usable
        assert memory.kv_cache_bytes == (
            usable - memory.weights_bytes - memory.activation_bytes - memory.runtime_overhead_bytes
        )
        # Llama 3.1 8B: a 16-token block spans 32 layers x 2 x 8 KV heads x 128 x 2 bytes x 16
        # = 2 MiB; a sequence of 8,192 tokens takes 512 blocks.
        assert memory.kv_cache_blocks == memory.kv_cache_bytes // 2_097_152
        assert memory.kv_capacity_tokens == int(memory.kv_cache_blocks / 512 * 8192)
        assert memory.max_concurrent_sequences == memory.kv_cache_blocks // 512

    def test_profiling_peak_is_the_larger_of_forward_pass_and_sampler(self) -> None:
        # vLLM runs the dummy forward pass, then the dummy sampler, and reads the allocator's
        # peak: the larger of the two, not their sum.
        # Qwen3-32B, 8,192 tokens: (2 x 25,600 MLP + 4 x 5,120) x 2 bytes = 143,360 B a token,
        # 1,174,405,120 B; 1,024 rows x 151,936 logits x 4 bytes x 4 copies = 2,489,319,424 B.
        qwen = spec(architecture="qwen3-32b", max_num_seqs=1024, max_num_batched_tokens=8192)
        assert activation_bytes_per_gpu(qwen, Parallelism()) == 2_489_319_424
        # Llama 3.1 8B with 16 sequences: (2 x 14,336 + 4 x 4,096) x 2 = 90,112 B a token,
        # 738,197,504 B over 8,192 tokens; the sampler's 16 x 128,256 x 4 x 4 = 32,833,536 B
        # is the smaller.
        llama = spec(max_num_seqs=16, max_num_batched_tokens=8192)
        assert activation_bytes_per_gpu(llama, Parallelism()) == 738_197_504

    def test_lower_memory_utilization_leaves_less_kv_cache(self) -> None:
        full = plan(spec()).groups[0].memory
        lean = plan(spec(gpu_memory_utilization=0.5)).groups[0].memory
        assert lean.kv_capacity_tokens < full.kv_capacity_tokens


class TestSmallestLayout:
    """The KV cache decides how far a model must be sharded."""

    def test_llama_3_3_70b_bf16_does_not_fit_one_h100(self) -> None:
        model_plan = plan(spec(architecture="llama-3.3-70b", machine_type="a3-highgpu-8g"))
        assert not model_plan.groups[0].memory.fits
        assert "does-not-fit" in codes(model_plan)

    def test_llama_3_3_70b_needs_tp2_at_8k_context(self) -> None:
        model = spec(architecture="llama-3.3-70b", machine_type="a3-highgpu-8g")
        assert smallest_layout(model, model.parallelism) == Parallelism(tensor=2)

    def test_llama_3_3_70b_needs_tp4_at_128k_context(self) -> None:
        model = spec(
            architecture="llama-3.3-70b", machine_type="a3-highgpu-8g", max_model_len=131072
        )
        assert smallest_layout(model, model.parallelism) == Parallelism(tensor=4)
        assert not plan(model.model_copy(update={"parallelism": Parallelism(tensor=2)})).ok

    def test_deepseek_v3_fp8_fits_eight_h200(self) -> None:
        model_plan = plan(
            spec(architecture="deepseek-v3", accelerator="h200-141gb", parallelism={"tensor": 8},
                 max_model_len=32768)
        )  # fmt: skip
        assert model_plan.groups[0].memory.fits
        assert model_plan.groups[0].placement.machine_type == "a3-ultragpu-8g"
        assert model_plan.ok

    def test_deepseek_v3_fp8_does_not_fit_eight_a100_80gb(self) -> None:
        model = spec(architecture="deepseek-v3", accelerator="a100-80gb", parallelism={"tensor": 8},
                     max_model_len=32768)  # fmt: skip
        model_plan = plan(model)
        assert not model_plan.groups[0].memory.fits
        verdict = next(v for v in model_plan.verdicts if v.code == "does-not-fit")
        # two whole 8-GPU nodes, one pipeline stage each
        assert verdict.suggestion == Parallelism(tensor=8, pipeline=2)
        assert "tensor=8 pipeline=2" in verdict.message


class TestVerdicts:
    """Each verdict names the problem and the smallest layout that would work."""

    def test_tensor_parallelism_across_nodes_is_an_error(self) -> None:
        model_plan = plan(
            spec(architecture="llama-3.3-70b", machine_type="a3-highgpu-8g",
                 parallelism={"tensor": 16})
        )  # fmt: skip
        verdict = next(v for v in model_plan.verdicts if v.code == "tp-crosses-node")
        assert verdict.severity == "error"
        assert "tensor=16 needs 16 GPUs on one node; a3-highgpu-8g has 8" in verdict.message
        # The fix is the smallest layout that fits, inside one node: tensor=8 pipeline=2 would
        # span two nodes needlessly, which the pack refuses.
        assert verdict.suggestion == Parallelism(tensor=2)
        assert "needless-span" in codes(model_plan)

    def test_a_replica_spanning_nodes_when_one_node_holds_it_is_an_error(self) -> None:
        model = spec(architecture="llama-3.3-70b", machine_type="a3-highgpu-8g",
                     parallelism={"tensor": 4, "pipeline": 4})  # fmt: skip
        verdict = next(v for v in plan(model).verdicts if v.code == "needless-span")
        assert verdict.severity == "error"
        assert "tensor=4 pipeline=4 spans 2 nodes of 8 GPUs" in verdict.message
        assert verdict.suggestion == Parallelism(tensor=2)

    def test_a_profile_placement_that_scatters_a_node_sized_group_is_an_error(self) -> None:
        model_plan = plan(spec(parallelism={"tensor": 2}, placement="PACK"))
        verdict = next(v for v in model_plan.verdicts if v.code == "placement-strategy")
        assert verdict.severity == "error"
        assert "must be STRICT_PACK" in verdict.message

    def test_tensor_size_must_divide_heads(self) -> None:
        verdict = next(
            v for v in plan(spec(parallelism={"tensor": 3})).verdicts if v.code == "tp-heads"
        )
        assert "does not divide llama-3.1-8b's 32 attention heads and 8 KV heads" in verdict.message
        assert verdict.suggestion == Parallelism(tensor=1)

    def test_model_that_fits_fewer_gpus_is_over_sharded(self) -> None:
        model_plan = plan(spec(parallelism={"tensor": 4}))
        verdict = next(v for v in model_plan.verdicts if v.code == "over-sharded")
        assert verdict.severity == "warning"
        assert "fits on 1 GPU(s) with tensor=1" in verdict.message
        assert model_plan.ok  # wasteful, not broken

    def test_does_not_fit_names_memory_and_fix(self) -> None:
        model_plan = plan(spec(architecture="llama-3.3-70b", accelerator="a100-40gb"))
        verdict = next(v for v in model_plan.verdicts if v.code == "does-not-fit")
        assert "a100-40gb offers 36.0 GiB at gpu_memory_utilization 0.9" in verdict.message
        # TP=4 leaves 36.0 - 32.9 weights - 1.0 runtime (communicators included) - 1.2
        # activations and sampler = 0.9 GiB, enough for the 0.6 GiB one 8,192-token sequence
        # needs (8,192 x 81,920 B).
        assert verdict.suggestion == Parallelism(tensor=4)
        assert "use tensor=4" in verdict.message

    def test_expert_parallelism_on_dense_model_is_an_error(self) -> None:
        model_plan = plan(spec(parallelism={"data": 2, "expert": True}))
        verdict = next(v for v in model_plan.verdicts if v.code == "ep-on-dense")
        assert "llama-3.1-8b is dense" in verdict.message
        assert verdict.suggestion == Parallelism()

    def test_ep_size_must_divide_experts(self) -> None:
        mixtral = spec(architecture="mixtral-8x7b", machine_type="a3-highgpu-8g",
                       parallelism={"tensor": 1, "data": 3, "expert": True})  # fmt: skip
        verdict = next(v for v in plan(mixtral).verdicts if v.code == "ep-size-indivisible")
        assert "expert-parallel size 3" in verdict.message
        assert "8 experts" in verdict.message
        assert verdict.suggestion == Parallelism(tensor=1, data=2, expert=True)

    def test_fp8_on_ampere_is_weight_only(self) -> None:
        model_plan = plan(
            spec(architecture="llama-3.3-70b", quantization="fp8", accelerator="a100-80gb",
                 parallelism={"tensor": 2})
        )  # fmt: skip
        verdict = next(v for v in model_plan.verdicts if v.code == "fp8-weight-only")
        assert verdict.severity == "warning"
        assert "W8A16" in verdict.message

    def test_fp8_on_hopper_has_no_weight_only_warning(self) -> None:
        model_plan = plan(spec(architecture="llama-3.3-70b", quantization="fp8",
                               parallelism={"tensor": 2}))  # fmt: skip
        assert "fp8-weight-only" not in codes(model_plan)


class TestPlacement:
    def test_machine_is_the_smallest_that_holds_a_replica(self) -> None:
        placement = (
            plan(spec(architecture="llama-3.3-70b", parallelism={"tensor": 2})).groups[0].placement
        )
        assert placement.machine_type == "a3-highgpu-2g"
        assert placement.gke_accelerator == "nvidia-h100-80gb"

    def test_small_replicas_pack_a_large_node(self) -> None:
        placement = plan(
            spec(architecture="llama-3.3-70b", quantization="fp8", machine_type="a3-highgpu-8g",
                 parallelism={"tensor": 2},
                 autoscaling={"min_replicas": 4, "max_replicas": 9})
        ).groups[0].placement  # fmt: skip
        assert placement.replicas_per_node == 4
        assert (placement.min_nodes, placement.max_nodes) == (1, 3)
        assert not placement.spans_nodes

    def test_pipeline_over_nodes_spans_whole_nodes(self) -> None:
        placement = plan(
            spec(architecture="deepseek-v3", accelerator="a100-80gb",
                 parallelism={"tensor": 8, "pipeline": 2},
                 autoscaling={"min_replicas": 1, "max_replicas": 3})
        ).groups[0].placement  # fmt: skip
        assert placement.machine_type == "a2-ultragpu-8g"
        assert (placement.gpus_per_replica, placement.nodes_per_replica) == (16, 2)
        assert placement.spans_nodes and placement.replicas_per_node == 0
        assert (placement.min_nodes, placement.max_nodes) == (2, 6)

    def test_total_gpus_is_replicas_times_dp_tp_pp(self) -> None:
        model_plan = plan(
            spec(architecture="qwen3-30b-a3b", machine_type="a3-highgpu-8g",
                 parallelism={"tensor": 2, "data": 4, "expert": True},
                 autoscaling={"min_replicas": 3, "max_replicas": 3})
        )  # fmt: skip
        assert model_plan.total_gpus_min == 3 * 4 * 2 * 1
        assert model_plan.groups[0].placement.expert_parallel_size == 8


class TestEstimatesAndCost:
    def test_cost_per_million_tokens_follows_price_and_throughput(self) -> None:
        group = plan(spec()).groups[0]
        price = MACHINE_TYPES["a3-highgpu-1g"].price_per_hour_usd
        expected = price / (group.estimates.output_tokens_per_s * 3600) * 1e6
        assert group.cost.usd_per_million_output_tokens == pytest.approx(expected)

    def test_stack_price_overrides_catalog(self) -> None:
        base = plan(spec())
        cheaper = plan(spec(), prices={"a3-highgpu-1g": 5.53})
        assert cheaper.groups[0].cost.price_per_hour_usd == 5.53
        assert cheaper.usd_per_million_output_tokens == pytest.approx(
            base.usd_per_million_output_tokens * 5.53 / base.groups[0].cost.price_per_hour_usd
        )

    def test_fp8_decodes_faster_than_bf16_on_hopper(self) -> None:
        bf16 = plan(spec(architecture="llama-3.3-70b", parallelism={"tensor": 4}))
        fp8 = plan(
            spec(architecture="llama-3.3-70b", parallelism={"tensor": 4}, quantization="fp8")
        )
        assert fp8.itl_s < bf16.itl_s
        assert fp8.ttft_s < bf16.ttft_s

    def test_longer_prompts_take_longer_to_first_token(self) -> None:
        # a context with room for the spread of both workloads' prompts: the comparison is of
        # prompt lengths, not of how many of them the context cuts short
        room = {"max_model_len": 32768}
        short = plan(spec(workload={"input_tokens": 500, "output_tokens": 100}, **room))
        long = plan(spec(workload={"input_tokens": 6000, "output_tokens": 100}, **room))
        assert long.ttft_s > 5 * short.ttft_s

    def test_itl_target_caps_the_decode_batch(self) -> None:
        free = plan(spec()).groups[0].estimates
        capped = plan(spec(), itl_target_s=0.015).groups[0].estimates
        assert capped.decode_batch < free.decode_batch
        assert capped.itl_at_batch_s <= 0.015

    def test_disaggregated_plan_has_prefill_and_decode_groups(self) -> None:
        model_plan = plan(
            spec(architecture="llama-3.3-70b", quantization="fp8", parallelism={"tensor": 2},
                 disaggregation={"prefill": {"autoscaling": {"min_replicas": 2, "max_replicas": 4}},
                                 "decode": {"parallelism": {"tensor": 4}}})
        )  # fmt: skip
        prefill, decode = model_plan.group("prefill"), model_plan.group("decode")
        assert prefill.parallelism.tensor == 2 and decode.parallelism.tensor == 4
        assert prefill.placement.min_replicas == 2
        # the prompt's KV cache crosses the network before decode starts
        assert (
            prefill.estimates.prefill_s
            > plan(
                spec(architecture="llama-3.3-70b", quantization="fp8", parallelism={"tensor": 2})
            )
            .groups[0]
            .estimates.prefill_s
        )
        assert model_plan.itl_s == decode.estimates.itl_s
        assert model_plan.total_gpus_min == 2 * 2 + 1 * 4
