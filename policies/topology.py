"""Topology: layouts that cannot work or waste GPUs. Each RayService is judged by the layout it
deploys, on the GPUs its worker pods hold, by the planner's own verdicts (`rules.verdicts`):
whatever `servestack plan` accepts the pack accepts, and the reverse; nothing here restates a
rule or a fact about a model or a GPU."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy import Severity

from policies.common import ADVISORY, ResourceCheck, resource_policy, stack_policy
from policies.views import (
    class_pools,
    deployments_of,
    gpu_pools_by_machine,
    judge,
    planner_verdicts,
    rayservices,
    spec_for,
)


def _verdicts(*codes: str) -> ResourceCheck:
    """A check that reports the planner's verdicts with these codes on each deployed layout."""

    def check(
        resource_type: str, name: str, props: Mapping[str, Any], config: Mapping[str, Any]
    ) -> Iterator[str]:
        for view, deployment in deployments_of(resource_type, name, props):
            yield from planner_verdicts(view, deployment, *codes)

    return check


def _fits(
    resource_type: str, name: str, props: Mapping[str, Any], config: Mapping[str, Any]
) -> Iterator[str]:
    wanted = int(config.get("min_sequences", 1))
    for view, deployment in deployments_of(resource_type, name, props):
        spec = spec_for(view, deployment)
        memory = judge(view, deployment).memory
        if not memory.fits:
            yield from planner_verdicts(view, deployment, "does-not-fit")
        elif memory.max_concurrent_sequences < wanted:
            yield (
                f"{view.name} ({deployment.role}): its KV cache holds "
                f"{memory.max_concurrent_sequences} sequence(s) of max_model_len "
                f"{spec.max_model_len:,}; this policy asks for {wanted}"
            )


def _expert_parallel(
    resource_type: str, name: str, props: Mapping[str, Any], config: Mapping[str, Any]
) -> Iterator[str]:
    for view, deployment in deployments_of(resource_type, name, props):
        spec = spec_for(view, deployment)
        if spec.parallelism.expert:
            # The layout as the profile asked it (the compiler drops expert parallelism of a
            # dense model), so the request is judged rather than dropped silently.
            yield from planner_verdicts(
                view, deployment, "ep-on-dense", "ep-size-indivisible", layout=spec.parallelism
            )


def _compact_for_multinode(resources: list[Any], config: Mapping[str, Any]) -> Iterator[str]:
    compact = {pool.machine: pool.compact for pool in gpu_pools_by_machine(resources).values()}
    steps = class_pools(resources)
    for view in rayservices(resources):
        per_pod = view.gpus_per_pod()
        machine = view.machine()
        chains = {g.compute_class for g in view.worker_groups if g.compute_class}
        for deployment in view.deployments:
            spans = deployment.layout.gpus_per_replica > per_pod
            loose = [p.name for chain in chains for p in steps.get(chain, []) if not p.compact]
            if spans and loose:
                yield (
                    f"{view.name} ({deployment.role}): a replica spans nodes, but the capacity "
                    f"steps {', '.join(loose)} have no compact placement: its ranks may sit "
                    "racks apart"
                )
            spans = deployment.layout.gpus_per_replica > per_pod
            if spans and machine is not None and not compact.get(machine.name, False):
                yield (
                    f"{view.name} ({deployment.role}): a replica spans "
                    f"{-(-deployment.layout.gpus_per_replica // per_pod)} {machine.name} nodes, "
                    "but their pool has no compact placement: its ranks may sit racks apart"
                )


TOPOLOGY_POLICIES = [
    resource_policy(
        "topology-rayservice-tp-within-node",
        "Tensor parallelism stays inside one node: TP is at most the GPUs of one worker pod.",
        "Use the layout the message names: the smallest that fits, inside one node where one "
        "holds the model (`servestack plan` gives the same verdict; `--recommend` ranks "
        "layouts).",
        _verdicts("tp-crosses-node"),
        severity=Severity.CRITICAL,
    ),
    resource_policy(
        "topology-rayservice-tp-divides-heads",
        "The tensor-parallel size divides the attention heads, and divides or is a multiple of "
        "the KV heads (vLLM refuses anything else at start).",
        "Use the tensor size the message names; `servestack plan` shows the same verdict.",
        _verdicts("tp-heads"),
    ),
    resource_policy(
        "topology-rayservice-fp8-blocks-whole",
        "FP8 weights scaled in blocks are split over tensor parallelism at whole blocks only: "
        "every rank's share of an MLP or expert width (vLLM refuses anything else at load).",
        "Use the layout the message names, or expert parallelism for the experts; "
        "`servestack plan` shows the same verdict.",
        _verdicts("fp8-block-shard"),
    ),
    resource_policy(
        "topology-rayservice-strict-pack",
        "A tensor-parallel group that fits one node is placed STRICT_PACK; only cross-node "
        "pipeline stages may be PACK.",
        "Let the compiler write placement_group_config (it emits STRICT_PACK), or set "
        "strategy: STRICT_PACK by hand.",
        _verdicts("placement-strategy"),
    ),
    resource_policy(
        "topology-rayservice-fits",
        "The model fits: weights plus the KV cache of max_model_len sequences fit the GPUs' "
        "usable memory.",
        "Use the layout the message names (more tensor parallelism, FP8 weights or KV cache), "
        "or lower max_model_len.",
        _fits,
        severity=Severity.CRITICAL,
        config={
            "min_sequences": {
                "type": "integer",
                "minimum": 1,
                "default": 1,
                "description": "Sequences of max_model_len the KV cache must hold at once.",
            }
        },
    ),
    resource_policy(
        "topology-rayservice-needless-span",
        "A replica crosses nodes only when no layout inside one node holds the model.",
        "Use the single-node layout the message names; crossing nodes trades NVLink for the "
        "network.",
        _verdicts("needless-span"),
    ),
    resource_policy(
        "topology-rayservice-over-sharded",
        "A replica uses no more GPUs than the model needs inside one node.",
        "Use the smaller layout the message names and serve more replicas with the GPUs saved.",
        _verdicts("over-sharded"),
        enforcement=ADVISORY,
        severity=Severity.LOW,
    ),
    resource_policy(
        "topology-rayservice-expert-parallel",
        "Expert parallelism only for mixture-of-experts models, with an EP size (DP x TP) that "
        "divides the experts.",
        "Set parallelism.expert: false for a dense model, or the data size the message names.",
        _expert_parallel,
    ),
    stack_policy(
        "topology-nodepool-compact-for-multinode",
        "A replica that spans nodes runs on a node pool with compact placement.",
        "Set compact_placement: true for the machine type under servestack:gpu_pools (a "
        "replica spanning nodes also turns it on), or use a layout inside one node.",
        _compact_for_multinode,
    ),
]
