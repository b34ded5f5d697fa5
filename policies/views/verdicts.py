"""The planner's judgement of a deployed layout, computed once per deployment per run: the
profile overlaid with what the deployment actually runs (its effective spec), and the memory and
verdicts of `serving.plan` on it, memoised by that spec, the layout, the GPUs a worker pod holds
and the placement strategy. Every rule that asks (seven of them) shares the one answer."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from policies.views.base import UnreadableError, also_forget
from policies.views.rayservice import RayServiceView
from policies.views.serve_config import Deployment
from serving import catalog
from serving.plan import planner, rules
from serving.plan.memory import MemoryBreakdown
from serving.plan.rules import Verdict
from serving.spec.parts import Parallelism
from serving.spec.profile import ModelSpec

# Engine keys that carry the layout, by the profile field they override.
_LAYOUT_KEYS = {
    "max_model_len": "max_model_len",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "max_num_seqs": "max_num_seqs",
    "gpu_memory_utilization": "gpu_memory_utilization",
}
_MEMO_SIZE = 512


@dataclass(frozen=True)
class Judgement:
    memory: MemoryBreakdown
    verdicts: tuple[Verdict, ...]


_specs: OrderedDict[tuple[str, str, int, str | None], ModelSpec] = OrderedDict()
_judgements: OrderedDict[tuple[str, str, str, int, str | None], Judgement] = OrderedDict()


def _remember(memo: OrderedDict[Any, Any], key: Any, value: Any) -> None:
    memo[key] = value
    if len(memo) > _MEMO_SIZE:
        memo.popitem(last=False)


def _forget() -> None:
    _specs.clear()
    _judgements.clear()


also_forget(_forget)


def _accelerator(ray_name: Any) -> str | None:
    """The catalog key of a GPU named as Ray names it (H100, A100-80G)."""
    for key, gpu in catalog.ACCELERATORS.items():
        if gpu.ray_accelerator_type == ray_name:
            return key
    return None


def spec_for(view: RayServiceView, deployment: Deployment) -> ModelSpec:
    """The profile, overlaid with what this deployment actually runs."""
    machine = view.machine()
    key = (
        view.profile_text or "",
        view.serve_text,
        deployment.index,
        machine.name if machine else None,
    )
    if key in _specs:
        return _specs[key]
    fields = dict(view.profile())
    # Expert parallelism asked of a dense model is dropped by the compiler (vLLM would refuse
    # it); the request is still judged, so it is not dropped silently.
    asked = bool((fields.get("parallelism") or {}).get("expert"))
    layout = deployment.layout.model_copy(update={"expert": deployment.layout.expert or asked})
    fields["parallelism"] = layout.model_dump()
    fields["disaggregation"] = None
    for key_name, field in _LAYOUT_KEYS.items():
        if key_name in deployment.engine:
            fields[field] = deployment.engine[key_name]
    accelerator = _accelerator(deployment.accelerator_type)
    if accelerator is not None:
        fields["accelerator"] = accelerator
    if machine is not None and machine.accelerator == fields.get("accelerator"):
        fields["machine_type"] = machine.name
    try:
        spec = ModelSpec.model_validate(fields)
    except ValidationError as exc:
        raise UnreadableError(
            view.name, "its model profile", f"does not validate: {exc.errors()[0]['msg']}"
        ) from None
    _remember(_specs, key, spec)
    return spec


def judgement(
    spec: ModelSpec, role: str, layout: Parallelism, gpus_per_node: int, strategy: str | None
) -> Judgement:
    """The planner's memory and verdicts for one layout, computed once for the same inputs."""
    key = (spec.model_dump_json(), role, layout.model_dump_json(), gpus_per_node, strategy)
    if key not in _judgements:
        memory = planner.memory(spec, layout)
        found = rules.verdicts(
            spec, role, layout, memory,  # type: ignore[arg-type]
            gpus_per_node=gpus_per_node, strategy=strategy,
        )  # fmt: skip
        _remember(_judgements, key, Judgement(memory, tuple(found)))
    return _judgements[key]


def judge(
    view: RayServiceView, deployment: Deployment, layout: Parallelism | None = None
) -> Judgement:
    """The planner's judgement of a deployment, on the GPUs its worker pods hold and with the
    placement strategy it asks; `layout` judges another layout of the same deployment."""
    spec = spec_for(view, deployment)
    role = deployment.role if deployment.role in ("prefill", "decode") else "server"
    return judgement(
        spec,
        role,
        deployment.layout if layout is None else layout,
        view.gpus_per_pod(),
        deployment.strategy or None,
    )


def planner_verdicts(
    view: RayServiceView, deployment: Deployment, *codes: str, layout: Parallelism | None = None
) -> Iterator[str]:
    """The planner's verdicts with these codes on the layout a deployment runs, as messages: the
    pack judges a deployed layout by the same rules `servestack plan` gives its verdicts by."""
    for verdict in judge(view, deployment, layout).verdicts:
        if verdict.code in codes:
            yield f"{view.name} ({deployment.role}): {verdict.message}"
