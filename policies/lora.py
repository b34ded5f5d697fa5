"""LoRA adapters: routed to a replica that can see them, within the rank vLLM was sized for, and
read from a bucket no account but the model's own reads. Each fails silently or leaks in a
running cluster, so it is caught here."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy import Severity

from policies.common import resource_policy, stack_policy
from policies.views import RayServiceView, UnreadableError, deployments_of, rayservices
from policies.views.serve_config import Deployment
from serving.catalog.fast_paths import DIRECT_STREAMING_VARIABLE, FORWARD_BODY_VARIABLE
from serving.compile.routers import ROUTER_CLASSES
from serving.plan.rules.lora_routing import ADAPTER_AWARE_KINDS, lora_routing_problem
from serving.spec.lora import Lora
from serving.spec.names import gcp_account_id
from serving.spec.parts import ADAPTER_AWARE_ROUTERS
from serving.spec.sources import GCS_SCHEME

ADAPTER_AWARE_CLASSES = {ROUTER_CLASSES[kind] for kind in ADAPTER_AWARE_ROUTERS}
# vLLM's max_lora_rank where the engine is asked none: the profile's default is vLLM's.
VLLM_DEFAULT_MAX_LORA_RANK = Lora.model_fields["max_lora_rank"].default
BUCKET_IAM_TYPES = (
    "gcp:storage/bucketIAMMember:BucketIAMMember",
    "gcp:storage/bucketIAMBinding:BucketIAMBinding",
)


def _serves_adapters(deployment: Deployment) -> bool:
    """Ray's loader (`lora_config`, off direct streaming) or vLLM's static adapters
    (`lora_modules`, under it) or vLLM's LoRA switch: serving.compile.lora says which is where."""
    engine = deployment.engine
    return bool(
        deployment.config.get("lora_config")
        or engine.get("lora_modules")
        or engine.get("enable_lora") is True
    )


def _pods_env(view: RayServiceView) -> list[dict[str, str | None]]:
    return [view.head_env(), *(group.env for group in view.worker_groups)]


def _routing(
    resource_type: str, name: str, props: Mapping[str, Any], config: Mapping[str, Any]
) -> Iterator[str]:
    for view, deployment in deployments_of(resource_type, name, props):
        if not _serves_adapters(deployment):
            continue
        router = deployment.router_class or "Ray's default"
        problem = lora_routing_problem(
            direct_streaming=view.head_env().get(DIRECT_STREAMING_VARIABLE) == "1",
            router=router,
            adapter_aware=deployment.router_class in ADAPTER_AWARE_CLASSES,
            forwards_body=all(env.get(FORWARD_BODY_VARIABLE) == "1" for env in _pods_env(view)),
        )
        if problem is not None:
            yield f"{view.name} ({deployment.role}): {problem}"


def _adapters(view: RayServiceView) -> list[Mapping[str, Any]]:
    """The adapters the RayService's profile names (its annotation)."""
    lora = view.profile().get("lora")
    if lora is None:
        raise UnreadableError(view.name, "its model profile's lora", "is missing")
    adapters = lora.get("adapters") if isinstance(lora, Mapping) else None
    if not isinstance(adapters, list) or not all(isinstance(a, Mapping) for a in adapters):
        raise UnreadableError(view.name, "its model profile's lora.adapters", "is not a list")
    return adapters


def _rank(
    resource_type: str, name: str, props: Mapping[str, Any], config: Mapping[str, Any]
) -> Iterator[str]:
    for view, deployment in deployments_of(resource_type, name, props):
        if not _serves_adapters(deployment):
            continue
        engine = deployment.engine
        if engine.get("enable_lora") is not True:
            yield (
                f"{view.name} ({deployment.role}): it serves LoRA adapters (lora_config or "
                "lora_modules), but vLLM's enable_lora is not set"
            )
            continue
        ceiling = engine.get("max_lora_rank", VLLM_DEFAULT_MAX_LORA_RANK)
        for adapter in _adapters(view):
            rank = adapter.get("rank")
            if not isinstance(rank, int) or not isinstance(ceiling, int):
                raise UnreadableError(view.name, f"adapter {adapter.get('name')}'s rank")
            if rank > ceiling:
                yield (
                    f"{view.name} ({deployment.role}): adapter {adapter.get('name')} has rank "
                    f"{rank}, above max_lora_rank {ceiling}: vLLM refuses to load it"
                )


def _bucket_of(source: Any) -> str | None:
    if not isinstance(source, str) or not source.startswith(GCS_SCHEME):
        return None
    return source.removeprefix(GCS_SCHEME).partition("/")[0]


def _members(props: Mapping[str, Any]) -> list[Any]:
    if "members" in props:
        members = props.get("members")
        return list(members) if isinstance(members, list) else [members]
    return [props.get("member")]


def _readers(resources: list[Any], config: Mapping[str, Any]) -> Iterator[str]:
    owners: dict[str, tuple[str, str]] = {}  # bucket -> (RayService, its account id)
    for view in rayservices(resources):
        if not any(_serves_adapters(d) for d in view.deployments):
            continue
        served = view.profile().get("name")
        if not isinstance(served, str):
            raise UnreadableError(view.name, "its model profile's name")
        for adapter in _adapters(view):
            bucket = _bucket_of(adapter.get("source"))
            if bucket is not None:
                owners[bucket] = (view.name, gcp_account_id(served))
    for resource in resources:
        if resource.resource_type not in BUCKET_IAM_TYPES:
            continue
        bucket = resource.props.get("bucket")
        if bucket not in owners:
            continue
        service, account = owners[bucket]
        for member in _members(resource.props):
            if not isinstance(member, str):
                raise UnreadableError(resource.name, "member", "is not known before deployment")
            if not member.startswith(f"serviceAccount:{account}@"):
                yield (
                    f"{resource.name} lets {member} read gs://{bucket}, where {service} keeps its "
                    f"LoRA adapters: only the model's own account ({account}) may read them"
                )


LORA_POLICIES = [
    resource_policy(
        "serving-rayservice-lora-routing",
        "LoRA adapters behind direct streaming are routed by a router that reads the adapter "
        "from the request body, which HAProxy forwards.",
        f"Use router: {ADAPTER_AWARE_KINDS} in the profile (servestack forwards the body), or "
        "fast_paths.direct_streaming: false.",
        _routing,
        severity=Severity.CRITICAL,
    ),
    resource_policy(
        "serving-rayservice-lora-rank",
        "Every LoRA adapter's rank is within the max_lora_rank vLLM preallocates for.",
        "Raise lora.max_lora_rank in the profile to the largest adapter's rank or above.",
        _rank,
    ),
    stack_policy(
        "stack-bucket-lora-readers",
        "A bucket holding a model's LoRA adapters is readable by that model's account alone.",
        "Keep each model's adapters (and weights) in a bucket of its own; grant no other account "
        "or group read access to it.",
        _readers,
    ),
]
