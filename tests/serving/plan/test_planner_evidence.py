"""The planner on points with outside evidence: expert-parallel all-to-all message sizes worked by
hand, memory against published vLLM runs, the error band a plan carries, and saturated
throughput."""

from __future__ import annotations

import math

import pytest
from planner_support import codes, spec

from serving.catalog import MACHINE_TYPES
from serving.catalog.models import ARCHITECTURES
from serving.plan.accuracy import error_band
from serving.plan.collectives import (
    CROSS_NODE_ALLTOALL_EFFICIENCY,
    FP8_DISPATCH_BYTES_PER_VALUE,
    NVLINK_ALLTOALL_EFFICIENCY,
    comm_s,
)
from serving.plan.expert_spread import gpus_touched, nodes_touched
from serving.plan.memory import RUNTIME_COMMUNICATION_BYTES
from serving.plan.planner import (
    ALLTOALL_LATENCY_S,
    alltoall_bytes_per_rank,
    alltoall_s,
    decode_step_s,
    memory,
    plan,
    saturated_batch,
    weight_bytes_per_gpu,
)
from serving.plan.speed import HBM_EFFICIENCY, burst_decode_s
from serving.spec.parts import Parallelism


class TestAllToAll:
    """Each DP rank dispatches its own tokens to the expert-parallel group, not the group's."""

    def test_deepseek_v3_fp8_dp8_ep_message_is_the_ranks_own_tokens(self) -> None:
        deepseek = spec(architecture="deepseek-v3", accelerator="h200-141gb",
                        machine_type="a3-ultragpu-8g",
                        parallelism={"tensor": 1, "data": 8, "expert": True})  # fmt: skip
        layout = deepseek.parallelism
        # 128 tokens x 8 experts x 7,168 hidden x 2 bytes, 7 of 8 ranks elsewhere
        assert alltoall_bytes_per_rank(deepseek, layout, 128) == 7 / 8 * 128 * 8 * 7168 * 2
        assert alltoall_bytes_per_rank(deepseek, layout, 128) == 12_845_056
        # dispatch + combine on each of the 58 MoE layers (61, the first 3 dense), over one
        # direction of NVLink (450 GB/s)
        expected = 2 * 58 * (ALLTOALL_LATENCY_S + 12_845_056 / 450e9)
        machine = MACHINE_TYPES["a3-ultragpu-8g"]
        assert alltoall_s(deepseek, machine, layout, 128) == pytest.approx(expected)
        assert alltoall_s(deepseek, machine, layout, 128) == pytest.approx(7.95e-3, rel=1e-3)

    def test_qwen3_30b_a3b_dp8_ep_message_is_the_ranks_own_tokens(self) -> None:
        qwen = spec(architecture="qwen3-30b-a3b", machine_type="a3-highgpu-8g",
                    parallelism={"tensor": 1, "data": 8, "expert": True})  # fmt: skip
        layout = qwen.parallelism
        # 64 tokens x 8 experts x 2,048 hidden x 2 bytes, 7 of 8 ranks elsewhere
        assert alltoall_bytes_per_rank(qwen, layout, 64) == 1_835_008
        machine = MACHINE_TYPES["a3-highgpu-8g"]
        expected = 2 * 48 * (ALLTOALL_LATENCY_S + 1_835_008 / 450e9)
        assert alltoall_s(qwen, machine, layout, 64) == pytest.approx(expected)

    def test_wide_ep_sends_the_other_nodes_share_through_the_gpu_nics(self) -> None:
        # DeepSeek-V3 at DP16 + EP over two a3-ultragpu-8g nodes: a rank's 128 tokens make
        # 128 x 8 x 7,168 x 2 = 14,680,064 bytes of copies; 8 of 16 ranks sit on the other node,
        # so 7,340,032 bytes leave through this GPU's 400 Gb/s NIC (3,200 / 8) at DeepEP's
        # 43 of its 50 GB/s: 170.7 us; the 7 of 16 on its own node take 6,422,528 / 450e9 =
        # 14.3 us of NVLink meanwhile. The slower paces it: (40 + 170.7) us, twice, 58 MoE layers.
        deepseek = spec(architecture="deepseek-v3", accelerator="h200-141gb",
                        machine_type="a3-ultragpu-8g",
                        parallelism={"tensor": 1, "data": 16, "expert": True})  # fmt: skip
        machine = MACHINE_TYPES["a3-ultragpu-8g"]
        remote_s = 7_340_032 / (3200e9 / 8 / 8 * 43 / 50)
        assert remote_s == pytest.approx(170.7e-6, rel=1e-3)
        expected = 2 * 58 * (ALLTOALL_LATENCY_S + remote_s)
        assert alltoall_s(deepseek, machine, deepseek.parallelism, 128) == pytest.approx(expected)
        # A3 Mega's GPUDirect-TCPXO gives each GPU half of that NIC: the remote share takes twice
        mega = MACHINE_TYPES["a3-megagpu-8g"]
        h100 = deepseek.model_copy(update={"accelerator": "h100-80gb"})
        slower = 2 * 58 * (ALLTOALL_LATENCY_S + 2 * remote_s)
        assert alltoall_s(h100, mega, deepseek.parallelism, 128) == pytest.approx(slower)

    def test_experts_sharded_over_tensor_parallel_ranks_ride_the_all_reduce(self) -> None:
        # Qwen3-235B-A22B at TP8 with --enable-expert-parallel and one DP rank: every rank holds
        # the same tokens, so nothing is dispatched (vLLM: dp_size > 1 and use_ep); its step's
        # collectives are TP8's two all-reduces a layer, as without expert parallelism.
        qwen = spec(architecture="qwen3-235b-a22b", machine_type="a3-highgpu-8g")
        machine = MACHINE_TYPES["a3-highgpu-8g"]
        tp8_ep = Parallelism(tensor=8, data=1, expert=True)
        assert tp8_ep.expert_parallel_size == 8
        assert alltoall_s(qwen, machine, tp8_ep, 64) == 0.0
        assert comm_s(qwen, machine, tp8_ep, 64) == comm_s(qwen, machine, Parallelism(tensor=8), 64)
        # Two DP ranks of TP4 do dispatch: 64 tokens x 8 experts x 4,096 hidden x 2 bytes, 7 of
        # the 8 ranks elsewhere, over NVLink, dispatch and combine on each of 94 layers.
        dp2 = Parallelism(tensor=4, data=2, expert=True)
        expected = 2 * 94 * (ALLTOALL_LATENCY_S + 7 / 8 * 64 * 8 * 4096 * 2 / 450e9)
        assert alltoall_s(qwen, machine, dp2, 64) == pytest.approx(expected)

    def test_more_data_ranks_do_not_grow_a_ranks_message(self) -> None:
        qwen = spec(architecture="qwen3-30b-a3b", machine_type="a3-highgpu-8g")
        dp2 = Parallelism(tensor=1, data=2, expert=True)
        dp8 = Parallelism(tensor=1, data=8, expert=True)
        # only the share sent elsewhere grows (1/2 -> 7/8), not the tokens
        ratio = alltoall_bytes_per_rank(qwen, dp8, 64) / alltoall_bytes_per_rank(qwen, dp2, 64)
        assert ratio == pytest.approx((7 / 8) / (1 / 2))


class TestHighThroughputAllToAll:
    """DeepEP's high-throughput kernels (all2all_backend deepep_high_throughput): a token goes
    once to each node, and once to each GPU, that holds any of its experts."""

    def test_deepseek_v3s_groups_decide_the_nodes_a_token_reaches(self) -> None:
        deepseek = ARCHITECTURES["deepseek-v3"]
        # EP 8: each GPU holds one of the 8 groups of 32; a token's experts come from 4 groups.
        assert gpus_touched(deepseek, 8) == pytest.approx(4.0)
        # EP 16 on two nodes of 8: each node holds 4 groups, and a token misses one only when
        # its 4 groups are all the other node's, 1 choice of C(8, 4) = 70.
        reached, remote = nodes_touched(deepseek, 16, 8)
        assert reached == pytest.approx(2 * 69 / 70)
        assert remote == pytest.approx(69 / 70)
        # EP 32 on four nodes of 2 groups each: a node is missed when none of its 2 groups is
        # among the 4, C(6, 4) = 15 of 70; a sender's own node is one of those reached.
        reached, remote = nodes_touched(deepseek, 32, 8)
        assert reached == pytest.approx(4 * 55 / 70)
        assert remote == pytest.approx(3 * 55 / 70)

    def test_without_groups_a_gpu_is_missed_by_every_one_of_the_picks(self) -> None:
        qwen = ARCHITECTURES["qwen3-235b-a22b"]  # 128 experts, 8 a token, no groups
        # EP 16: a GPU holds 8 experts; all 8 picks miss them with C(120, 8) / C(128, 8)
        missed = math.comb(120, 8) / math.comb(128, 8)
        assert gpus_touched(qwen, 16) == pytest.approx(16 * (1 - missed))

    @pytest.mark.parametrize(
        ("ep", "measured_gb_s"), [(16, 43), (32, 58), (64, 51)]
    )  # fmt: skip
    def test_deepeps_own_internode_table(self, ep: int, measured_gb_s: float) -> None:
        """DeepEP's high-throughput dispatch on H800s (NVLink 200 GB/s a direction, one 400 Gb/s
        CX7 NIC, 50 GB/s, a GPU; docs/legacy.md, "Normal kernels"): 4,096 tokens, top-8 of 256
        experts after picking min(nodes, 4) node-groups, FP8 dispatch. Its "bottleneck
        bandwidth" counts a token once per node it reaches, the sender's own included. The
        model's time per token, the slower of the NIC and NVLink legs, lands within 7%."""
        nodes = ep // 8
        routing = ARCHITECTURES["deepseek-v3"].model_copy(
            update={"expert_groups": nodes, "expert_groups_per_token": min(nodes, 4)}
        )
        token = 7168 * FP8_DISPATCH_BYTES_PER_VALUE  # 7,168 FP8 values and 56 float32 scales
        assert token == 7392
        reached, remote = nodes_touched(routing, ep, 8)
        nic_s = remote * token / (50e9 * CROSS_NODE_ALLTOALL_EFFICIENCY)
        nvlink_s = gpus_touched(routing, ep) * token / (200e9 * NVLINK_ALLTOALL_EFFICIENCY)
        measured_s = reached * token / (measured_gb_s * 1e9)
        assert max(nic_s, nvlink_s) == pytest.approx(measured_s, rel=0.07)

    def test_deepseek_v3_prefill_at_ep16_on_a3_ultra(self) -> None:
        # 8,192 tokens a rank over two a3-ultragpu-8g nodes (400 Gb/s a GPU, 43 of 50 GB/s; NVLink
        # 450 GB/s at 153/200): FP8 dispatch, 8,192 x 7,392 B to 69/70 of a remote node =
        # 1.388 ms on the NIC against 6.07 GPUs' worth, 1.067 ms, on NVLink; the BF16 combine
        # 7,168 x 2 B a token, 2.692 ms. 58 MoE layers of (40 us + 1.388 ms + 40 us + 2.692 ms).
        deepseek = spec(architecture="deepseek-v3", accelerator="h200-141gb",
                        machine_type="a3-ultragpu-8g",
                        parallelism={"tensor": 1, "data": 16, "expert": True},
                        engine_args={"all2all_backend": "deepep_high_throughput"})  # fmt: skip
        machine = MACHINE_TYPES["a3-ultragpu-8g"]
        nic = 3200e9 / 8 / 8 * 43 / 50
        dispatch_s = 8192 * 7392 * (69 / 70) / nic
        combine_s = 8192 * 7168 * 2 * (69 / 70) / nic
        assert dispatch_s == pytest.approx(1.388e-3, rel=1e-3)
        assert combine_s == pytest.approx(2.692e-3, rel=1e-3)
        nvlink_s = 8192 * 7392 * gpus_touched(deepseek.architecture, 16) / (450e9 * 153 / 200)
        assert nvlink_s == pytest.approx(1.067e-3, rel=1e-3)
        expected = 58 * (2 * ALLTOALL_LATENCY_S + dispatch_s + combine_s)
        assert alltoall_s(deepseek, machine, deepseek.parallelism, 8192) == pytest.approx(expected)
        # The low-latency kernels' model sends each of the 8 experts' copies on its own: more.
        low_latency = deepseek.model_copy(update={"engine_args": {}})
        assert alltoall_s(low_latency, machine, deepseek.parallelism, 8192) > 1.5 * expected


class TestPublishedMemory:
    """Whether a model fits follows what published vLLM runs did on the same GPU."""

    def test_gpt_oss_120b_loads_as_vllm_logs_it(self) -> None:
        # "Model loading took 65.9651 GiB" on one H100, vLLM 0.10.1 (Marlin MXFP4):
        # https://github.com/vllm-project/vllm/issues/23278 — not the 59.8 GiB of 4.25-bit weights.
        weights = weight_bytes_per_gpu(spec(architecture="gpt-oss-120b"), Parallelism())
        assert weights / 2**30 == pytest.approx(65.97, rel=0.01)

    def test_gpt_oss_120b_at_131k_does_not_fit_one_h100(self) -> None:
        # vLLM's default max_model_len for gpt-oss-120b is 131072; on one H100 it reports
        # "Available KV cache memory: -2.14 GiB" and fails to start (vllm#23278, vLLM 0.10.1), and
        # still only 1.71 GiB at gpu_memory_utilization 0.95 (vllm#27508), short of the 4.5 GiB one
        # 131,072-token sequence needs.
        model_plan = plan(spec(architecture="gpt-oss-120b", max_model_len=131072))
        assert not model_plan.groups[0].memory.fits
        assert "does-not-fit" in codes(model_plan)

    def test_gpt_oss_120b_at_32k_fits_one_h100(self) -> None:
        # GPUStack serves `vllm serve openai/gpt-oss-120b --max-model-len 32768` on one H100 SXM:
        # https://docs.gpustack.ai/latest/performance-lab/gpt-oss-120b/h100
        assert plan(spec(architecture="gpt-oss-120b", max_model_len=32768)).groups[0].memory.fits

    @pytest.mark.parametrize("accelerator", ["h100-80gb", "a100-80gb"])
    def test_qwen3_32b_bf16_at_32k_fits_one_80gb_gpu(self, accelerator: str) -> None:
        # GPUStack serves `vllm serve Qwen/Qwen3-32B --max-model-len 32768` (BF16, vLLM 0.11.0) on
        # "a single NVIDIA A100 SXM 80GB GPU", and `vllm serve Qwen/Qwen3-32B` (its default
        # 40,960) without tensor parallelism on H100:
        # https://docs.gpustack.ai/latest/performance-lab/qwen3-32b/a100 and .../qwen3-32b/h100.
        # 61.1 GiB of weights and 8 GiB for one 32k sequence leave about 2.6 GiB on an H100 at
        # gpu_memory_utilization 0.9 for activations and the runtime; a lone GPU needs no
        # communicators, which the fixed 2 GiB overhead of old charged every GPU.
        model_plan = plan(spec(architecture="qwen3-32b", accelerator=accelerator,
                               max_model_len=32768))  # fmt: skip
        assert model_plan.groups[0].memory.fits
        assert model_plan.ok

    def test_mla_down_projections_are_whole_on_every_tensor_parallel_rank(self) -> None:
        # vLLM's DeepSeek-V3 (vllm/model_executor/models/deepseek_v2.py) builds fused_qkv_a_proj
        # with disable_tp=True: 61 layers x 7168 x (1536 + 512 + 64) FP8 weights on each rank.
        deepseek = spec(architecture="deepseek-v3", accelerator="h200-141gb", max_model_len=32768)
        replicated = 61 * 7168 * (1536 + 512 + 64)
        tp4 = weight_bytes_per_gpu(deepseek, Parallelism(tensor=4))
        tp8 = weight_bytes_per_gpu(deepseek, Parallelism(tensor=8))
        # halving every shard but the replicated one: 8 x tp8 - 4 x tp4 = (8 - 4) x replicated
        assert 8 * tp8 - 4 * tp4 == pytest.approx(4 * replicated)
        # and a decode step reads it: at TP8 the step streams that much more than an even split
        h200 = MACHINE_TYPES["a3-ultragpu-8g"]
        even = deepseek.model_copy(
            update={"architecture": deepseek.architecture.model_copy(update={"q_lora_rank": 0})}
        )
        layout = Parallelism(tensor=8)
        extra = decode_step_s(deepseek, h200, layout, 1, 512) - decode_step_s(
            even, h200, layout, 1, 512
        )
        bandwidth = deepseek.gpu.hbm_bandwidth_bytes_per_s * HBM_EFFICIENCY
        assert extra == pytest.approx(61 * 7168 * 1536 * 7 / 8 / bandwidth)

    def test_communicators_cost_memory_only_in_a_group(self) -> None:
        alone = memory(spec(), Parallelism()).runtime_overhead_bytes
        grouped = memory(spec(), Parallelism(tensor=2)).runtime_overhead_bytes
        assert grouped - alone == RUNTIME_COMMUNICATION_BYTES


def test_a_plan_carries_the_measured_error_for_its_kind_of_model() -> None:
    dense = plan(spec()).measured_error
    moe = plan(spec(architecture="qwen3-30b-a3b", machine_type="a3-highgpu-8g")).measured_error
    for phase in ("decode", "ttft", "saturation"):
        assert dense[phase] == error_band(False, phase).band  # type: ignore[arg-type]
        assert moe[phase] == error_band(True, phase).band  # type: ignore[arg-type]
    assert dense != moe


class TestSaturation:
    """A saturated server's batch and what its queued burst really delivers."""

    def test_saturated_batch_holds_sequences_at_their_average_length(self) -> None:
        model = spec(workload={"input_tokens": 2000, "output_tokens": 400}, max_num_seqs=4096)
        mem = memory(model, model.parallelism)
        # prompt plus half the output: vLLM allocates KV blocks as tokens arrive
        assert saturated_batch(model, model.parallelism, mem) == mem.kv_capacity_tokens // 2200

    def test_max_num_seqs_caps_the_saturated_batch(self) -> None:
        model = spec(workload={"input_tokens": 100, "output_tokens": 100}, max_num_seqs=64)
        assert saturated_batch(model, model.parallelism, memory(model, model.parallelism)) == 64

    def test_a_draining_burst_delivers_less_than_the_full_batch_rate(self) -> None:
        model = spec(workload={"input_tokens": 200, "output_tokens": 200})
        layout = model.parallelism
        machine = MACHINE_TYPES["a3-highgpu-1g"]
        batch = 256
        full_rate = batch / decode_step_s(model, machine, layout, batch, 300)
        burst = burst_decode_s(model, machine, layout, batch, requests=1000)
        assert 1000 * 200 / burst < full_rate
        # and far more than one sequence at a time would
        assert 1000 * 200 / burst > 20 / decode_step_s(model, machine, layout, 1, 300)
