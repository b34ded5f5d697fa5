"""step-holds-layout: every step of a capacity chain can run the model's workers. A step on
another machine type must carry the same GPU (the deployment asks Ray for its accelerator type,
and the plan's memory is that GPU's) and as many GPUs per node as a worker pod takes, which is
at least the tensor-parallel size (`tensor_across_nodes`). The one wording of that rule, which
the platform plan and the policy pack both give."""

from __future__ import annotations

from serving import catalog
from serving.plan.rules.tp_crosses_node import tensor_across_nodes


def step_cannot_hold(
    step_machine: str, planned_accelerator: str, *, tensor: int, pod_gpus: int
) -> str | None:
    """Why a chain step on `step_machine` cannot run workers planned on `planned_accelerator`
    (`tensor`-way tensor parallelism, `pod_gpus` GPUs per worker pod), or None."""
    step = catalog.machine_type(step_machine)
    where = f"the capacity step on {step.name}"
    if step.accelerator != planned_accelerator:
        return (
            f"{where} carries {step.accelerator}, but the workers were planned on "
            f"{planned_accelerator} and ask Ray for that accelerator type"
        )
    if tensor > step.gpus_per_node:
        return f"{where}: {tensor_across_nodes(tensor, step.name, step.gpus_per_node)}"
    if pod_gpus > step.gpus_per_node:
        return (
            f"{where}: a worker pod takes {pod_gpus} GPUs, a {step.name} node has "
            f"{step.gpus_per_node}"
        )
    return None
