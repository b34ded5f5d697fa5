"""Communication inside one replica per engine step: tensor-parallel all-reduces, expert-parallel
all-to-alls (dispatch and combine) and pipeline-stage hand-offs, over NVLink inside a node and
the node's GPU network across nodes. `serving.plan.speed` adds them to a step's compute; the
all-reduce's latency is fitted (`serving.plan.fitted`)."""

from __future__ import annotations

from serving.catalog import MachineType
from serving.plan import fitted
from serving.plan.expert_spread import gpus_touched, nodes_touched
from serving.plan.memory import ACTIVATION_BYTES
from serving.spec.parts import Parallelism
from serving.spec.profile import ModelSpec

# One expert-parallel dispatch or combine (all-to-all), launch included.
ALLTOALL_LATENCY_S = 40e-6
# One pipeline-stage hand-off.
P2P_LATENCY_S = 30e-6


def _link_bandwidth(spec: ModelSpec, machine: MachineType, group_gpus: int) -> float:
    """NVLink inside a node; the node's GPU network once a group crosses nodes."""
    if group_gpus <= machine.gpus_per_node:
        return spec.gpu.nvlink_bandwidth_bytes_per_s
    return machine.network_bandwidth_bytes_per_s / machine.gpus_per_node


def _allreduce_s(spec: ModelSpec, machine: MachineType, layout: Parallelism, tokens: int) -> float:
    """Two ring all-reduces of the hidden state per layer (attention and MLP outputs)."""
    tp = layout.tensor
    if tp == 1:
        return 0.0
    message = tokens * spec.architecture.hidden_size * ACTIVATION_BYTES
    bandwidth = _link_bandwidth(spec, machine, tp)
    one = fitted.ALLREDUCE_LATENCY_S + 2 * (tp - 1) / tp * message / bandwidth
    return 2 * spec.architecture.num_layers * one


def alltoall_bytes_per_rank(spec: ModelSpec, layout: Parallelism, tokens_per_rank: int) -> float:
    """Bytes one rank sends to the other expert-parallel ranks in one dispatch (or combine) of
    one MoE layer: each of *its own* tokens' hidden states goes to the ranks holding the
    experts_per_token experts it routes to, of which (EP - 1) / EP are elsewhere. Every DP rank
    sends its own batch at the same time; no rank sends the whole group's tokens."""
    ep = layout.expert_parallel_size
    arch = spec.architecture
    message = tokens_per_rank * arch.experts_per_token * arch.hidden_size * ACTIVATION_BYTES
    return (ep - 1) / ep * message


# Share of a GPU's NIC that expert-parallel all-to-alls reach across nodes: DeepEP's internode
# kernels move 43-46 GB/s per H800 over a CX7 InfiniBand 400 Gb/s NIC (about 50 GB/s), its
# low-latency decode kernels 39-46 GB/s (github.com/deepseek-ai/DeepEP, README, "Performance").
# The lower end, 43 of 50. Published only for RDMA; taken for GPUDirect-TCPX(O) too, unmeasured.
CROSS_NODE_ALLTOALL_EFFICIENCY = 43 / 50


def _nic_alltoall_bandwidth(machine: MachineType) -> float:
    """What one GPU's share of the node's GPU NICs moves in an expert-parallel all-to-all."""
    return (
        machine.network_bandwidth_bytes_per_s
        / machine.gpus_per_node
        * CROSS_NODE_ALLTOALL_EFFICIENCY
    )


# Share of NVLink's one-way bandwidth DeepEP's kernels reach: 153 GB/s dispatching among 8 H800s
# (DeepEP, docs/legacy.md, "Normal kernels", intranode), whose NVLink moves 200 GB/s each way.
NVLINK_ALLTOALL_EFFICIENCY = 153 / 200

# vLLM's `all2all_backend` for DeepEP's high-throughput ("normal") kernels, which prefill runs,
# and for its low-latency ones, which decode runs.
HIGH_THROUGHPUT = "deepep_high_throughput"
LOW_LATENCY = "deepep_low_latency"
# Block-FP8 checkpoints (DeepSeek's) dispatch FP8 with a float32 scale per 128 values
# (DeepEPHTPrepareAndFinalize quantizes before it dispatches); the combine is in BF16.
FP8_DISPATCH_BYTES_PER_VALUE = 1 + 4 / 128


def deepep_dispatch(spec: ModelSpec, layout: Parallelism) -> bool:
    """The layout's MoE layers dispatch through DeepEP: several DP ranks with their experts
    spread over them (vLLM's all-to-all kernels run only where `dp_size > 1 and use_ep`,
    FusedMoEParallelConfig.use_all2all_kernels, vLLM 0.22) and a DeepEP `all2all_backend`."""
    deepep = spec.engine_args.get("all2all_backend") in (HIGH_THROUGHPUT, LOW_LATENCY)
    return deepep and layout.expert_parallel_size > 1 and layout.data > 1


def _high_throughput_s(
    spec: ModelSpec, machine: MachineType, layout: Parallelism, tokens_per_rank: int
) -> float:
    """One MoE layer's dispatch and combine on DeepEP's high-throughput kernels. A token crosses
    the network once to each other node holding any of its experts (RDMA), and reaches each GPU
    holding any of them once over NVLink (forwarded there by the node it landed on); the combine
    returns the same way, partial sums reduced inside each node first (DeepEP's README, "Normal
    kernels with NVLink and RDMA forwarding"). The legs overlap: the slower paces it. Counts of
    nodes and GPUs: serving.plan.expert_spread.

    Against DeepEP's own table (H800, 400 Gb/s CX7 NICs, 4,096 tokens, top-8 of 256 experts,
    FP8 dispatch), per token: at EP 16 NVLink paces it, 6.7 GPUs x 7,392 B / 153 GB/s = 323 ns
    against the 344 ns its 43 GB/s over 2 nodes reads; at EP 32 the NIC, 3 remote nodes x 7,392 B
    / 43 GB/s = 516 ns against 510 (4 nodes at 58 GB/s); at EP 64, 3.5 x 7,392 B / 43 GB/s =
    602 ns against 580 (4 nodes at 51 GB/s). tests/serving/plan/test_planner_evidence.py works
    these."""
    arch = spec.architecture
    ep = layout.expert_parallel_size
    _, remote_nodes = nodes_touched(arch, ep, machine.gpus_per_node)
    gpus = gpus_touched(arch, ep)
    dispatch_value = (
        FP8_DISPATCH_BYTES_PER_VALUE if spec.expert_weights_dtype == "fp8" else ACTIVATION_BYTES
    )
    nic = _nic_alltoall_bandwidth(machine)
    nvlink = spec.gpu.nvlink_bandwidth_bytes_per_s * NVLINK_ALLTOALL_EFFICIENCY
    total = 0.0
    for value_bytes in (dispatch_value, ACTIVATION_BYTES):
        token_bytes = tokens_per_rank * arch.hidden_size * value_bytes
        total += ALLTOALL_LATENCY_S + max(
            token_bytes * remote_nodes / nic, token_bytes * gpus / nvlink
        )
    return total


def alltoall_s(
    spec: ModelSpec, machine: MachineType, layout: Parallelism, tokens_per_rank: int
) -> float:
    """Expert parallelism dispatches and combines each token's hidden state per MoE layer.
    Within a node every copy crosses NVLink. Across nodes (wide EP) a rank's copies split by
    where their experts sit: (EP - gpus per node) / EP of them leave the node through this
    GPU's share of the node's GPU NICs, at CROSS_NODE_ALLTOALL_EFFICIENCY, while (gpus per
    node - 1) / EP stay on NVLink at the same time; the slower of the two paces the step.

    Only a layout of several DP ranks dispatches. With one (tensor parallelism with experts
    sharded over it), every rank holds the same tokens, runs its own experts on them, and the
    layer's all-reduce, already counted, sums their outputs: vLLM uses its all-to-all kernels
    only where `dp_size > 1 and use_ep` (FusedMoEParallelConfig.use_all2all_kernels,
    vllm/model_executor/layers/fused_moe/config.py, vLLM 0.22, as since 0.9)."""
    ep = layout.expert_parallel_size
    if ep == 1 or layout.data == 1:
        return 0.0
    layers = spec.architecture.moe_layers
    if spec.engine_args.get("all2all_backend") == HIGH_THROUGHPUT:
        return layers * _high_throughput_s(spec, machine, layout, tokens_per_rank)
    if ep <= machine.gpus_per_node:
        bandwidth = spec.gpu.nvlink_bandwidth_bytes_per_s
        one = (
            ALLTOALL_LATENCY_S + alltoall_bytes_per_rank(spec, layout, tokens_per_rank) / bandwidth
        )
    else:
        copies = alltoall_bytes_per_rank(spec, layout, tokens_per_rank) * ep / (ep - 1)
        nic = _nic_alltoall_bandwidth(machine)
        remote_s = copies * (ep - machine.gpus_per_node) / ep / nic
        local_s = copies * (machine.gpus_per_node - 1) / ep / spec.gpu.nvlink_bandwidth_bytes_per_s
        one = ALLTOALL_LATENCY_S + max(remote_s, local_s)
    return 2 * layers * one


def _pipeline_s(spec: ModelSpec, machine: MachineType, layout: Parallelism, tokens: int) -> float:
    if layout.pipeline == 1:
        return 0.0
    message = tokens * spec.architecture.hidden_size * ACTIVATION_BYTES
    bandwidth = _link_bandwidth(spec, machine, layout.model_parallel_size)
    return (layout.pipeline - 1) * (P2P_LATENCY_S + message / bandwidth)


def comm_s(spec: ModelSpec, machine: MachineType, layout: Parallelism, tokens: int) -> float:
    return (
        _allreduce_s(spec, machine, layout, tokens)
        + alltoall_s(spec, machine, layout, tokens)
        + _pipeline_s(spec, machine, layout, tokens)
    )
