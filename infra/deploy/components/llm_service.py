"""LlmService: one model on the cluster, its RayService and the objects around it (identities,
Hugging Face token, router code, NetworkPolicy, disruption budgets, route at the edge).

Manifests come from `infra/kube/manifests.py`, built from the model's compiled outputs; this
component
only registers them, with secrets from Pulumi secrets turned into Kubernetes Secrets."""

from __future__ import annotations

from ipaddress import IPv4Network
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s
from pydantic import Field

from infra.deploy.components.args import ComponentArgs
from infra.kube.disruption import (
    Resilience,
    disruption_budgets,
)
from infra.kube.edge import (
    model_ingress,
)
from infra.kube.manifests import (
    HF_TOKEN_KEY,
    hf_secret_name,
    rayservice,
    resource_name,
    serve_service_name,
    service_account_name,
    worker_service_account_name,
)
from infra.kube.namespaces import EDGE_NAMESPACE, SERVING_NAMESPACE
from infra.kube.ray_security import model_network_policy
from infra.kube.router_code import router_configmap, ships_router
from serving.compile.compiler import CompiledModel
from serving.compile.weights import gcs_weights
from serving.spec.names import gcp_account_id


class LlmServiceArgs(ComponentArgs):
    model: CompiledModel = Field(description="The model's spec, plan and compiled application.")
    resilience: Resilience = Field(
        default_factory=Resilience, description="GCS store, notice and drains of the stack."
    )
    project: str
    image: str
    host: str | None
    requests_per_second: int
    stream_timeout_s: int
    hf_token: Any = Field(default=None, description="pulumi.Output[str], secret, or None.")
    operator_namespace: str | None = Field(
        description="Where the KubeRay operator runs (None: GKE's add-on, namespace unknown)."
    )
    cluster_ranges: list[IPv4Network] = Field(
        description="The cluster's own address ranges, which the pods' HTTPS egress excludes."
    )
    token_generation: int = 0


class LlmService(pulumi.ComponentResource):
    """One model: its RayService, the identities its pods run as (the head's for KubeRay's
    autoscaler; the workers' without an API token, reading a gs:// bucket through Workload
    Identity), its Hugging Face token as a Secret, its NetworkPolicy and its route at the
    edge."""

    rayservice_name: pulumi.Output[str]
    serve_service: pulumi.Output[str]

    def __init__(
        self, name: str, args: LlmServiceArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("servestack:serving:LlmService", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        spec = args.model.spec
        ksa_annotations: dict[str, Any] = {}
        weights = gcs_weights(spec)
        if weights is not None:
            bucket, _ = weights
            reader = gcp.serviceaccount.Account(
                f"{name}-weights-reader",
                project=args.project,
                account_id=gcp_account_id(spec.name),
                display_name=f"servestack {spec.name} weights reader",
                opts=child,
            )
            gcp.storage.BucketIAMMember(
                f"{name}-weights-viewer",
                bucket=bucket,
                role="roles/storage.objectViewer",
                member=reader.email.apply(lambda email: f"serviceAccount:{email}"),
                opts=child,
            )
            gcp.serviceaccount.IAMMember(
                f"{name}-workload-identity",
                service_account_id=reader.name,
                role="roles/iam.workloadIdentityUser",
                member=(
                    f"serviceAccount:{args.project}.svc.id.goog"
                    f"[{SERVING_NAMESPACE}/{worker_service_account_name(spec)}]"
                ),
                opts=child,
            )
            ksa_annotations["iam.gke.io/gcp-service-account"] = reader.email
        account = k8s.core.v1.ServiceAccount(
            f"{name}-service-account",
            metadata={"name": service_account_name(spec), "namespace": SERVING_NAMESPACE},
            opts=child,
        )
        workers = k8s.core.v1.ServiceAccount(
            f"{name}-worker-account",
            metadata={
                "name": worker_service_account_name(spec),
                "namespace": SERVING_NAMESPACE,
                "annotations": ksa_annotations,
            },
            automount_service_account_token=False,
            opts=child,
        )
        policy = model_network_policy(
            resource_name(spec),
            SERVING_NAMESPACE,
            edge_namespace=EDGE_NAMESPACE,
            operator_namespace=args.operator_namespace,
            cluster_ranges=args.cluster_ranges,
        )
        network = k8s.networking.v1.NetworkPolicy(
            f"{name}-network-policy", metadata=policy["metadata"], spec=policy["spec"], opts=child
        )
        depends: list[pulumi.Resource] = [account, workers, network]
        with_token = args.hf_token is not None and weights is None
        if with_token:
            depends.append(
                k8s.core.v1.Secret(
                    f"{name}-hf-token",
                    metadata={"name": hf_secret_name(spec), "namespace": SERVING_NAMESPACE},
                    string_data={HF_TOKEN_KEY: args.hf_token},
                    opts=child,
                )
            )
        if ships_router(spec):
            code = router_configmap(spec)
            depends.append(
                k8s.core.v1.ConfigMap(
                    f"{name}-router", metadata=code["metadata"], data=code["data"], opts=child
                )
            )
        manifest = rayservice(
            args.model,
            args.image,
            with_hf_token=with_token,
            token_generation=args.token_generation,
            resilience=args.resilience,
        )
        service = k8s.apiextensions.CustomResource(
            f"{name}-rayservice",
            api_version=manifest["apiVersion"],
            kind=manifest["kind"],
            metadata=manifest["metadata"],
            spec=manifest["spec"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=depends),
        )
        minimums = {
            group["groupName"]: group["minReplicas"]
            for group in manifest["spec"]["rayClusterConfig"]["workerGroupSpecs"]
        }
        for budget in disruption_budgets(resource_name(spec), SERVING_NAMESPACE, minimums):
            k8s.policy.v1.PodDisruptionBudget(
                f"{name}-pdb-{budget['metadata']['name'].removeprefix(resource_name(spec) + '-')}",
                metadata=budget["metadata"],
                spec=budget["spec"],
                opts=child,
            )
        ingress = model_ingress(
            spec,
            host=args.host,
            requests_per_second=args.requests_per_second,
            stream_timeout_s=args.stream_timeout_s,
        )
        k8s.networking.v1.Ingress(
            f"{name}-ingress",
            metadata=ingress["metadata"],
            spec=ingress["spec"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[service]),
        )
        self.rayservice_name = service.urn.apply(lambda _: resource_name(spec))
        self.serve_service = service.urn.apply(lambda _: serve_service_name(spec))
        self.register_outputs(
            {"rayservice_name": self.rayservice_name, "serve_service": self.serve_service}
        )
