"""Prefill's terms, against figures computed by hand from the catalog; what async scheduling
changes in a decode step and in the time to first token.

Prefill math for T prompt tokens is m*T + a*T^2: the weights' matmuls grow with T, causal
attention with T^2. Both coefficients are read off `prefill_compute_s` at T and 2T, so the tests
hold the physics (which peak each term runs at, over which widths) without reaching inside.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from serving.catalog import ACCELERATORS, ARCHITECTURES
from serving.plan import fitted
from serving.plan.memory import weight_bytes, weight_bytes_per_gpu
from serving.plan.placement import choose_machine
from serving.plan.planner import plan, prefill_s
from serving.plan.speed import (
    ATTENTION_MFU,
    EXPERT_HBM_EFFICIENCY,
    EXPERT_MFU,
    EXPERT_MFU_SHARE,
    FP8_EXPERT_MATH_SPEEDUP,
    PREFILL_MFU,
    STEP_OVERHEAD_S,
    decode_step_s,
    prefill_compute_s,
    prompt_lengths,
    roofline,
    ttft_s,
)
from serving.plan.speed.roofline import expert_tile_efficiency
from serving.spec.profile import ModelSpec

TOKENS = 4096
H100 = ACCELERATORS["h100-80gb"]


def spec(**fields: Any) -> ModelSpec:
    base: dict[str, Any] = {"name": "m", "source": "org/model", "max_model_len": 32768}
    return ModelSpec.model_validate(base | fields)


@pytest.fixture
def no_tile_padding(monkeypatch: pytest.MonkeyPatch) -> None:
    """Experts' tiles full whatever the step (TestExpertTiles tests the padding): the prefill
    of T and 2T tokens then differs only by the terms these tests read off."""
    monkeypatch.setattr(roofline, "expert_tile_efficiency", lambda *args: 1.0)


def coefficients(model: ModelSpec) -> tuple[float, float]:
    """(m, a) of m*T + a*T^2 from the prefill of T and 2T tokens, without the LM head's rows
    (sampled=0; test_speed_lm_head tests them)."""
    once = prefill_compute_s(model, model.parallelism, TOKENS, sampled=0)
    twice = prefill_compute_s(model, model.parallelism, 2 * TOKENS, sampled=0)
    attention = (twice - 2 * once) / (2 * TOKENS**2)
    matmul = (4 * once - twice) / (2 * TOKENS)
    return matmul, attention


class TestPrefillAttention:
    def test_fp8_weights_leave_attention_at_bf16_peak(self) -> None:
        # Llama-3.3-70B over 2 H100s: 64 heads x 128 wide, 80 layers; causal attention is
        # 2 T^2 x 64 x 128 per layer (half the T x T scores and values, 2 FLOPs a multiply-add).
        bf16 = spec(architecture="llama-3.3-70b", accelerator="h100-80gb",
                    parallelism={"tensor": 2})  # fmt: skip
        fp8 = bf16.model_copy(update={"quantization": "fp8"})
        expected = 2 * 64 * 128 * 80 / (2 * H100.bf16_dense_flops * ATTENTION_MFU[9])
        assert coefficients(fp8)[1] == pytest.approx(expected)
        assert coefficients(bf16)[1] == pytest.approx(expected)
        # the matmuls do run at FP8 peak, twice BF16's on H100
        assert coefficients(bf16)[0] / coefficients(fp8)[0] == pytest.approx(2, rel=0.01)

    @pytest.mark.usefixtures("no_tile_padding")
    def test_mla_scores_over_192_wide_keys_and_weighs_128_wide_values(self) -> None:
        # DeepSeek-V3 on 8 H200s: 128 heads, keys 128 + 64 (RoPE) wide, values 128 wide, over
        # 61 layers: T^2 x 128 x (192 + 128) per layer.
        deepseek = spec(architecture="deepseek-v3", accelerator="h200-141gb",
                        parallelism={"tensor": 8})  # fmt: skip
        h200 = ACCELERATORS["h200-141gb"]
        expected = 128 * (192 + 128) * 61 / (8 * h200.bf16_dense_flops * ATTENTION_MFU[9])
        assert coefficients(deepseek)[1] == pytest.approx(expected)

    @pytest.mark.usefixtures("no_tile_padding")
    def test_mla_chunks_up_project_the_latents_of_the_chunks_before_them(self) -> None:
        # vLLM's MLA prefill attends to earlier chunks through their cached latents, which it
        # up-projects again through kv_b_proj (512 -> 128 heads x (128 + 128)) for each later
        # chunk: a 32,768-token prompt in chunks of 8,192 re-projects 8,192 x (1 + 2 + 3)
        # tokens in each of 61 layers, heads split over 8 ranks, at FP8 prefill math. Its four
        # steps also sample it four times, three more rows of the LM head (129,280 x 7,168)
        # than one step does.
        chunked = spec(architecture="deepseek-v3", accelerator="h200-141gb",
                       parallelism={"tensor": 8}, max_num_batched_tokens=8192)  # fmt: skip
        whole = chunked.model_copy(update={"max_num_batched_tokens": 32768})
        h200 = ACCELERATORS["h200-141gb"]
        assert h200.fp8_dense_flops is not None
        flops = 8192 * 6 * 2 * 512 * 128 * 256 * 61 + 3 * 2 * 129280 * 7168
        expected = flops / (8 * h200.fp8_dense_flops * PREFILL_MFU[9])
        layout = chunked.parallelism
        extra = prefill_compute_s(chunked, layout, 32768) - prefill_compute_s(whole, layout, 32768)
        assert extra == pytest.approx(expected)
        # a prompt that fits one chunk has no earlier chunk to re-project
        assert prefill_compute_s(chunked, layout, 8192) == prefill_compute_s(whole, layout, 8192)
        # grouped-query models keep every chunk's keys and values whole in the cache: the
        # chunks cost only their three more LM-head rows (128,256 x 8,192, over 4 ranks)
        llama = spec(architecture="llama-3.3-70b", accelerator="h100-80gb",
                     parallelism={"tensor": 4}, max_num_batched_tokens=8192)  # fmt: skip
        unchunked = llama.model_copy(update={"max_num_batched_tokens": 32768})
        rows = 3 * 2 * 128256 * 8192 / (4 * H100.bf16_dense_flops * PREFILL_MFU[9])
        chunked_s = prefill_compute_s(llama, llama.parallelism, 32768)
        assert chunked_s - prefill_compute_s(unchunked, llama.parallelism, 32768) == (
            pytest.approx(rows)
        )


class TestBlockFp8Experts:
    @pytest.mark.usefixtures("no_tile_padding")
    def test_fp8_experts_gain_the_fused_moe_speedup_not_fp8_peak(self) -> None:
        # Qwen3-235B-A22B: 22B active, of which 8 of 128 experts' 227.2B parameters are routed;
        # its embedding and LM head (151,936 x 4,096 each) are not multiplied per prompt token.
        arch = ARCHITECTURES["qwen3-235b-a22b"]
        routed = arch.expert_params * 8 / 128
        bf16 = spec(architecture="qwen3-235b-a22b", accelerator="h100-80gb",
                    parallelism={"tensor": 4})  # fmt: skip
        fp8 = bf16.model_copy(update={"quantization": "fp8"})
        body = arch.active_params - routed - 2 * 151936 * 4096
        dense = 2 * body / (4 * PREFILL_MFU[9])
        # the fused-MoE kernel's share of peak, not of the dense GEMMs' share
        experts = 2 * routed / (4 * EXPERT_MFU)
        assert coefficients(bf16)[0] == pytest.approx(
            dense / H100.bf16_dense_flops + experts / H100.bf16_dense_flops
        )
        assert coefficients(fp8)[0] == pytest.approx(
            dense / H100.fp8_dense_flops
            + experts / (H100.bf16_dense_flops * FP8_EXPERT_MATH_SPEEDUP)
        )

    @pytest.mark.usefixtures("no_tile_padding")
    def test_experts_deepep_dispatches_run_deepgemm_at_its_own_gain(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # Qwen3-235B-A22B-FP8 at DP 4 with its experts spread over the 4 ranks: dispatched by
        # DeepEP, vLLM multiplies them with DeepGEMM (2x over BF16 here), with its default
        # all-to-all with the Triton kernel it uses under TP (1.5x here). Per prompt token, the
        # routed 8/128 of 227.2B expert parameters cost 2 x 14.2B FLOPs at BF16 peak x the
        # fused-MoE kernel's share of it (EXPERT_MFU), over the gain.
        monkeypatch.setattr(fitted, "FP8_EXPERT_MATH_SPEEDUP", 1.5)
        monkeypatch.setattr(fitted, "DEEPGEMM_EXPERT_MATH_SPEEDUP", 2.0)
        arch = ARCHITECTURES["qwen3-235b-a22b"]
        routed = arch.expert_params * 8 / 128
        dp_ep = {"tensor": 1, "data": 4, "expert": True}
        triton = spec(architecture="qwen3-235b-a22b", accelerator="h100-80gb",
                      quantization="fp8", parallelism=dp_ep)  # fmt: skip
        deepgemm = triton.model_copy(
            update={"engine_args": {"all2all_backend": "deepep_high_throughput"}}
        )
        experts = 2 * routed / (H100.bf16_dense_flops * EXPERT_MFU)
        assert coefficients(triton)[0] - coefficients(deepgemm)[0] == pytest.approx(
            experts / 1.5 - experts / 2.0
        )
        # one DP rank has no DeepEP to dispatch through, whatever the backend says
        tp = triton.model_copy(update={"parallelism": triton.parallelism.model_copy(
            update={"tensor": 4, "data": 1})})  # fmt: skip
        tp_deepep = tp.model_copy(update={"engine_args": deepgemm.engine_args})
        assert coefficients(tp_deepep) == coefficients(tp)


class TestExpertShareByKernel:
    """BF16 and FP8 experts run vLLM's fused-MoE kernel at one share of peak on every
    generation; MXFP4 experts run kernels written for each, at a share of its dense rate."""

    @pytest.mark.usefixtures("no_tile_padding")
    def test_fused_moe_experts_take_one_share_of_each_gpus_peak(self) -> None:
        # Qwen3-30B-A3B: 8 of 128 experts routed. Its dense matmuls run at each generation's
        # prefill share of peak; its experts at EXPERT_MFU of peak on both, so an A100 takes
        # the peaks' ratio longer over them (989.4 / 312 TFLOP/s), not the dense rates'.
        arch = ARCHITECTURES["qwen3-30b-a3b"]
        routed = arch.expert_params * 8 / 128
        body = arch.active_params - routed - arch.embedding_params
        a100 = ACCELERATORS["a100-80gb"]
        for gpu in (H100, a100):
            qwen = spec(architecture="qwen3-30b-a3b", accelerator=gpu.key)
            dense = 2 * body / (gpu.bf16_dense_flops * PREFILL_MFU[gpu.compute_capability[0]])
            experts = 2 * routed / (gpu.bf16_dense_flops * EXPERT_MFU)
            assert coefficients(qwen)[0] == pytest.approx(dense + experts)

    def test_mxfp4_experts_follow_the_dense_rate(self) -> None:
        # gpt-oss-20b: MXFP4 experts, 4 of 32 routed, weight-only on both GPUs (BF16 math),
        # at EXPERT_MFU_SHARE of the generation's prefill rate.
        arch = ARCHITECTURES["gpt-oss-20b"]
        routed = arch.expert_params * 4 / 32
        body = arch.active_params - routed - arch.embedding_params
        for gpu in (H100, ACCELERATORS["a100-80gb"]):
            oss = spec(architecture="gpt-oss-20b", accelerator=gpu.key)
            rate = gpu.bf16_dense_flops * PREFILL_MFU[gpu.compute_capability[0]]
            expected = 2 * body / rate + 2 * routed / (rate * EXPERT_MFU_SHARE)
            assert coefficients(oss)[0] == pytest.approx(expected)


class TestPrefillMemory:
    def test_a_short_prompt_streams_only_the_experts_it_routes_to(self) -> None:
        # One token of Qwen3-30B-A3B routes to 8 of 128 experts: its prefill reads far less than
        # the whole model, which streaming every weight would take.
        qwen = spec(architecture="qwen3-30b-a3b", accelerator="h100-80gb")
        machine = choose_machine(qwen, 1)
        whole_model = weight_bytes_per_gpu(qwen, qwen.parallelism) / H100.hbm_bandwidth_bytes_per_s
        assert prefill_s(qwen, machine, qwen.parallelism, 1) < 0.5 * whole_model
        # a 2,048-token chunk touches every expert: the whole model streams
        assert prefill_s(qwen, machine, qwen.parallelism, 2048) > whole_model


class TestPromptSpread:
    """A chat workload's mean time to first token is the mean over its prompts, spread
    exponentially around the workload's mean, not the time of the mean prompt."""

    def test_slices_of_the_exponential_keep_the_mean(self) -> None:
        # Two halves of Exp(mean 1): below ln 2 the mean is 2(1 - (1 + ln 2)/2) = 0.3069, above
        # it 2(1 + ln 2)/2 = 1.6931.
        assert prompt_lengths(1000, 2) == [307, 1693]
        lengths = prompt_lengths(229)
        assert lengths == [15, 48, 86, 132, 190, 268, 388, 705]
        assert sum(lengths) / len(lengths) == 229

    def test_short_prompts_of_a_moe_read_fewer_experts(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # gpt-oss-120b on one H100: a t-token prompt touches 1 - (1 - 4/128)^t of the experts,
        # 0.99930 of them at the mean 229 but 0.88476 on average over the eight lengths above
        # (15 tokens touch 38%); with the experts' math at the dense matmuls' efficiency, every
        # one of those prefills is bound by the expert read.
        monkeypatch.setattr(fitted, "EXPERT_MFU_SHARE", 1.0)
        oss = spec(architecture="gpt-oss-120b", accelerator="h100-80gb",
                   workload={"input_tokens": 229, "output_tokens": 217})  # fmt: skip
        machine = choose_machine(oss, 1)
        layout = oss.parallelism
        _, experts = weight_bytes(oss)
        full_read_s = experts / (H100.hbm_bandwidth_bytes_per_s * EXPERT_HBM_EFFICIENCY)
        saved = ttft_s(oss, machine, layout, spread=False) - ttft_s(oss, machine, layout)
        assert saved == pytest.approx((0.99930 - 0.88476) * full_read_s, rel=1e-3)

    def test_long_prompts_of_a_dense_model_cost_more_than_short_ones_save(self) -> None:
        # Qwen3-8B on one H100 prefills a 233-token prompt bound by its math, a 15-token one by
        # its weight read: the long prompts' math outweighs what the short ones cannot save.
        qwen = spec(architecture="qwen3-8b", accelerator="h100-80gb",
                    workload={"input_tokens": 233, "output_tokens": 221})  # fmt: skip
        machine = choose_machine(qwen, 1)
        layout = qwen.parallelism
        assert ttft_s(qwen, machine, layout) > ttft_s(qwen, machine, layout, spread=False)

    def test_no_prompt_is_longer_than_the_context_leaves_room_for(self) -> None:
        # Qwen3-8B's prompts of 8,000 tokens on average, served at max_model_len 8,192 with 192
        # out: the longer half of the spread cannot be longer than the mean, so the spread can
        # only shorten the first token (unbounded, its long prompts would lengthen it, above).
        qwen = spec(architecture="qwen3-8b", accelerator="h100-80gb", max_model_len=8192,
                    workload={"input_tokens": 8000, "output_tokens": 192})  # fmt: skip
        machine = choose_machine(qwen, 1)
        layout = qwen.parallelism
        assert ttft_s(qwen, machine, layout) < ttft_s(qwen, machine, layout, spread=False)


class TestAsyncScheduling:
    """The Ray V2 executor runs vLLM with async scheduling: the engine prepares step n+1 while
    the GPU runs step n. GPUStack's gpt-oss-120b on one A100 (vLLM 0.11, ShareGPT at
    concurrency 4) with and without it: 11.67 -> 11.03 ms per output token, 61.91 -> 71.15 ms
    to the first token."""

    CONTEXT = 2048

    def pair(self) -> tuple[ModelSpec, ModelSpec]:
        def run(overlapped: bool) -> ModelSpec:
            return spec(architecture="gpt-oss-120b", accelerator="a100-80gb",
                        max_model_len=32768, workload={"input_tokens": 229, "output_tokens": 217},
                        fast_paths={"ray_v2_executor": overlapped})  # fmt: skip

        return run(False), run(True)

    def step(self, model: ModelSpec, batch: int) -> float:
        machine = choose_machine(model, 1)
        return decode_step_s(model, machine, model.parallelism, batch, self.CONTEXT)

    def test_the_steps_cpu_work_leaves_the_decode_step(self) -> None:
        sync, overlapped = self.pair()
        for batch in (1, 4, 64):
            assert self.step(sync, batch) - self.step(overlapped, batch) == pytest.approx(
                STEP_OVERHEAD_S
            )

    def test_a_new_prompt_waits_out_the_step_already_scheduled_without_it(self) -> None:
        sync, overlapped = self.pair()
        machine = choose_machine(sync, 1)
        layout = sync.parallelism
        context = 229 + 217 // 2
        # An idle engine has scheduled nothing ahead: the same first token either way.
        assert ttft_s(sync, machine, layout) == pytest.approx(ttft_s(overlapped, machine, layout))
        # With 3 sequences decoding: half the step under way, and under async scheduling the
        # whole next step too; beyond that wait, the step that carries the prompt costs the same
        # either way (the prompt and the 3 decoding tokens), a little more than the prompt alone.
        joined = []
        for model, steps in ((sync, 0.5), (overlapped, 1.5)):
            step = decode_step_s(model, machine, layout, 3, context)
            waited = ttft_s(model, machine, layout, running=3) - ttft_s(model, machine, layout)
            joined.append(waited - steps * step)
        assert joined[0] == pytest.approx(joined[1])
        assert 0 < joined[0] < 0.1 * decode_step_s(sync, machine, layout, 3, context)


class TestBurst:
    """Published throughput queues the run's prompts at once (`vllm bench serve --num-prompts`):
    a server stays at its full batch while the queue lasts, then drains."""

    def test_the_fewer_the_requests_the_larger_the_drain_and_the_lower_the_throughput(self) -> None:
        qwen = spec(architecture="qwen3-14b", accelerator="h100-80gb",
                    workload={"input_tokens": 217, "output_tokens": 202})  # fmt: skip
        rates = [
            plan(qwen, itl_target_s=math.inf, burst_requests=n).output_tokens_per_s
            for n in (100, 500, 1000, 100_000)
        ]
        assert rates == sorted(rates) and len(set(rates)) == len(rates)
        # however long the queue, no faster than the full batch decodes
        estimates = plan(qwen, itl_target_s=math.inf).groups[0].estimates
        assert rates[-1] < estimates.decode_batch / estimates.itl_at_batch_s


class TestExpertTiles:
    """vLLM's fused-MoE kernel pads each expert's tokens to whole tiles of BLOCK_SIZE_M rows
    (16, 32, 64, 128 for BF16 steps up to 32, 96, 512 tokens and beyond; 16 or 64 for block
    FP8 around 64 tokens): on average the last tile is half empty, or an expert takes a whole
    tile for the one token routed to it."""

    def test_a100s_small_budget_pads_more_than_h100s(self) -> None:
        # Qwen3-235B-A22B routes each token to 8 of 128 experts. A100's 2,048-token step gives
        # each expert 128 tokens in tiles of 128 rows: 1.5 tiles, 2/3 full; H100's 8,192 give
        # 512: 4.5 tiles, 512 / 576 full.
        a100 = spec(architecture="qwen3-235b-a22b", accelerator="a100-80gb",
                    parallelism={"tensor": 8})  # fmt: skip
        assert expert_tile_efficiency(a100, a100.parallelism, 2048) == pytest.approx(2 / 3)
        assert expert_tile_efficiency(a100, a100.parallelism, 8192) == pytest.approx(512 / 576)

    def test_block_fp8_tiles_and_sparse_tokens(self) -> None:
        # DeepSeek-V3 (block FP8, 8 of 256 experts): 8,192 tokens give 256 per expert in tiles of
        # 64 rows, 4.5 tiles, 256 / 288 full. Four decoding tokens give 0.125 per expert: an
        # expert is touched with probability 1 - e^-0.125 = 0.1175 and then takes a 16-row
        # tile, 0.125 / (16 x 0.1175) = 6.6% full.
        deepseek = spec(architecture="deepseek-v3", accelerator="h200-141gb",
                        parallelism={"tensor": 8})  # fmt: skip
        layout = deepseek.parallelism
        assert expert_tile_efficiency(deepseek, layout, 8192) == pytest.approx(256 / 288)
        sparse = 0.125 / (16 * (1 - math.exp(-0.125)))
        assert expert_tile_efficiency(deepseek, layout, 4) == pytest.approx(sparse)

    def test_expert_parallel_ranks_pool_their_tokens_and_dense_models_pad_nothing(self) -> None:
        # With DP2 + EP the experts see both ranks' 1,024 tokens: 2,048, as one rank's above.
        pooled = spec(architecture="qwen3-235b-a22b", accelerator="a100-80gb",
                      parallelism={"tensor": 4, "data": 2, "expert": True})  # fmt: skip
        assert expert_tile_efficiency(pooled, pooled.parallelism, 1024) == pytest.approx(2 / 3)
        dense = spec(architecture="qwen3-32b", accelerator="h100-80gb")
        assert expert_tile_efficiency(dense, dense.parallelism, 100) == 1.0
        # MXFP4 experts run other kernels, with tiles of their own: not padded here
        oss = spec(architecture="gpt-oss-120b", accelerator="h100-80gb")
        assert expert_tile_efficiency(oss, oss.parallelism, 100) == 1.0
