"""Communication inside one replica per engine step: tensor-parallel all-reduces, expert-parallel
all-to-alls (dispatch and combine) and pipeline-stage hand-offs, over NVLink inside a node and
the node's GPU network across nodes. `serving.plan.speed` adds them to a step's compute; the
all-reduce's latency is fitted (`serving.plan.fitted`)."""

from __future__ import annotations

from serving.catalog import MachineType
from serving.plan import fitted
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
    if ep <= machine.gpus_per_node:
        bandwidth = spec.gpu.nvlink_bandwidth_bytes_per_s
        one = (
            ALLTOALL_LATENCY_S + alltoall_bytes_per_rank(spec, layout, tokens_per_rank) / bandwidth
        )
    else:
        copies = alltoall_bytes_per_rank(spec, layout, tokens_per_rank) * ep / (ep - 1)
        nic = (
            machine.network_bandwidth_bytes_per_s
            / machine.gpus_per_node
            * CROSS_NODE_ALLTOALL_EFFICIENCY
        )
        remote_s = copies * (ep - machine.gpus_per_node) / ep / nic
        local_s = copies * (machine.gpus_per_node - 1) / ep / spec.gpu.nvlink_bandwidth_bytes_per_s
        one = ALLTOALL_LATENCY_S + max(remote_s, local_s)
    return 2 * spec.architecture.num_layers * one


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
