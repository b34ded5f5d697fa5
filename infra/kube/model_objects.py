"""One model's Kubernetes objects, built once.

`build_model_objects` makes every plain-dict object a model registers — its RayService, its
route at the edge, the router code it ships, its NetworkPolicy, its disruption budgets and its
two service accounts — and refuses any the Kubernetes API would not store. The size check of
the platform plan, `servestack render` and the LlmService component all read the one
`ModelObjects` it returns, so what is checked and rendered is what is registered, by
construction. The Pulumi program fills in the one value only it knows, the GCS store's address
(`with_gcs_address`), and adds what holds a Pulumi output: the Hugging Face token's Secret and
the weights reader's identity.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from ipaddress import IPv4Network
from typing import Any

from infra.kube.disruption import Resilience, disruption_budgets
from infra.kube.edge import model_ingress
from infra.kube.manifests import (
    rayservice,
    resource_name,
    service_account_name,
    worker_service_account_name,
)
from infra.kube.namespaces import EDGE_NAMESPACE, SERVING_NAMESPACE
from infra.kube.ray_security import model_network_policy
from infra.kube.router_code import router_configmap, ships_router
from serving.compile.compiler import CompiledModel
from serving.errors import ServestackError
from serving.spec.limits import size_problems


@dataclass(frozen=True)
class StackFacts:
    """What a stack sets in every one of its models' objects."""

    image: str
    host: str | None
    requests_per_second: int
    stream_timeout_s: int
    # The stack holds a Hugging Face token (its value is a Pulumi secret, never here).
    hf_token: bool
    token_generation: int = 0
    resilience: Resilience = field(default_factory=Resilience)
    # Where the KubeRay operator runs (None: GKE's add-on, namespace unknown).
    operator_namespace: str | None = None
    # The cluster's own address ranges, which the pods' HTTPS egress excludes.
    cluster_ranges: tuple[IPv4Network, ...] = ()
    # The ComputeClass of each machine type with a capacity chain, which its workers select.
    compute_classes: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelObjects:
    """Every plain-dict Kubernetes object of one model, in the order they are registered."""

    model: CompiledModel
    rayservice: dict[str, Any]
    ingress: dict[str, Any]
    router: dict[str, Any] | None
    network_policy: dict[str, Any]
    disruption_budgets: tuple[dict[str, Any], ...]
    service_account: dict[str, Any]
    worker_account: dict[str, Any]
    # The workers read the stack's Hugging Face token (a Secret the component makes).
    with_hf_token: bool

    @property
    def manifests(self) -> list[dict[str, Any]]:
        """The objects, router code first: the RayService mounts it."""
        router = [self.router] if self.router is not None else []
        return [
            self.service_account,
            self.worker_account,
            self.network_policy,
            *router,
            self.rayservice,
            *self.disruption_budgets,
            self.ingress,
        ]


def build_model_objects(model: CompiledModel, facts: StackFacts, source: str) -> ModelObjects:
    """The model's objects as `facts`' stack registers them, or a `ServestackError` naming the
    profile (`source`) when one of them is larger than the Kubernetes API stores."""
    spec = model.spec
    name = resource_name(spec)
    with_hf_token = facts.hf_token and not spec.weights_on_gcs
    service = rayservice(
        model,
        facts.image,
        with_hf_token=with_hf_token,
        token_generation=facts.token_generation,
        resilience=facts.resilience,
        compute_classes=facts.compute_classes,
    )
    minimums = {
        group["groupName"]: group["minReplicas"]
        for group in service["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    }
    objects = ModelObjects(
        model=model,
        rayservice=service,
        ingress=model_ingress(
            spec,
            host=facts.host,
            requests_per_second=facts.requests_per_second,
            stream_timeout_s=facts.stream_timeout_s,
        ),
        router=router_configmap(spec) if ships_router(spec) else None,
        network_policy=model_network_policy(
            name,
            SERVING_NAMESPACE,
            edge_namespace=EDGE_NAMESPACE,
            operator_namespace=facts.operator_namespace,
            cluster_ranges=list(facts.cluster_ranges),
        ),
        disruption_budgets=tuple(disruption_budgets(name, SERVING_NAMESPACE, minimums)),
        service_account=_service_account(service_account_name(spec), automount=True),
        # The workers call no Kubernetes API: no token is mounted into their pods.
        worker_account=_service_account(worker_service_account_name(spec), automount=False),
        with_hf_token=with_hf_token,
    )
    check_sizes(objects.manifests, source)
    return objects


def with_gcs_address(service: dict[str, Any], address: Any) -> dict[str, Any]:
    """The RayService with its GCS store's address (in the program, the Memorystore instance's
    output) in place of the placeholder it was built with; the rest is the same object."""
    config = service["spec"]["rayClusterConfig"]
    options = config["gcsFaultToleranceOptions"] | {"redisAddress": address}
    return service | {
        "spec": service["spec"]
        | {"rayClusterConfig": config | {"gcsFaultToleranceOptions": options}}
    }


def check_sizes(objects: list[dict[str, Any]], source: str) -> None:
    """Refuse, naming the profile, any object the Kubernetes API would not store: nothing of a
    model is registered or rendered when one of its objects is too large."""
    for manifest in objects:
        problems = size_problems(manifest)
        if problems:
            raise ServestackError(
                source, f"{manifest['kind']} {manifest['metadata']['name']}",
                "; ".join(problems),
                "the profile's env, engine_args or inline architecture are far too large: "
                "shorten them (the RayService carries the whole profile)",
            )  # fmt: skip


def _service_account(name: str, *, automount: bool) -> dict[str, Any]:
    account: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": SERVING_NAMESPACE},
    }
    if not automount:
        account["automountServiceAccountToken"] = False
    return account
