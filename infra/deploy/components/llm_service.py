"""LlmService: one model on the cluster, its RayService and the objects around it (identities,
Hugging Face token, router code, NetworkPolicy, disruption budgets, route at the edge).

The objects come built and size-checked from the platform plan (`infra/kube/model_objects.py`,
the same objects `servestack render` writes); this component only registers them, with the GCS
store's address filled in and secrets from Pulumi secrets turned into Kubernetes Secrets."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s
from pydantic import Field

from infra.deploy.components.args import ComponentArgs
from infra.kube.manifests import HF_TOKEN_KEY, hf_secret_name, resource_name, serve_service_name
from infra.kube.model_objects import ModelObjects, with_gcs_address
from infra.kube.namespaces import SERVING_NAMESPACE
from serving.compile.weights import gcs_weights
from serving.spec.names import gcp_account_id


class LlmServiceArgs(ComponentArgs):
    objects: ModelObjects = Field(
        description="The model's Kubernetes objects, as the platform plan built them."
    )
    project: str
    gcs_address: Any = Field(
        default=None,
        description="pulumi.Output[str]: the GCS store's address (None: the placeholder the "
        "objects were built with).",
    )
    hf_token: Any = Field(default=None, description="pulumi.Output[str], secret, or None.")


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
        objects = args.objects
        spec = objects.model.spec
        worker_account = objects.worker_account
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
            # The member is spelled from the account id, not read from the new account's
            # email, so that a preview (where that email is not yet known) shows the policy
            # pack who may read the bucket (policies/lora.py: adapters' readers).
            gcp.storage.BucketIAMMember(
                f"{name}-weights-viewer",
                bucket=bucket,
                role="roles/storage.objectViewer",
                member=f"serviceAccount:{gcp_account_id(spec.name)}@{args.project}"
                ".iam.gserviceaccount.com",
                opts=pulumi.ResourceOptions(parent=self, depends_on=[reader]),
            )
            gcp.serviceaccount.IAMMember(
                f"{name}-workload-identity",
                service_account_id=reader.name,
                role="roles/iam.workloadIdentityUser",
                member=(
                    f"serviceAccount:{args.project}.svc.id.goog"
                    f"[{SERVING_NAMESPACE}/{worker_account['metadata']['name']}]"
                ),
                opts=child,
            )
            metadata = worker_account["metadata"]
            worker_account = worker_account | {
                "metadata": metadata
                | {"annotations": {"iam.gke.io/gcp-service-account": reader.email}}
            }
        depends: list[pulumi.Resource] = [
            _account(f"{name}-service-account", objects.service_account, child),
            _account(f"{name}-worker-account", worker_account, child),
            k8s.networking.v1.NetworkPolicy(
                f"{name}-network-policy",
                metadata=objects.network_policy["metadata"],
                spec=objects.network_policy["spec"],
                opts=child,
            ),
        ]
        if objects.with_hf_token:
            if args.hf_token is None:
                raise ValueError(f"{spec.name}'s objects read a Hugging Face token none was given")
            depends.append(
                k8s.core.v1.Secret(
                    f"{name}-hf-token",
                    metadata={"name": hf_secret_name(spec), "namespace": SERVING_NAMESPACE},
                    string_data={HF_TOKEN_KEY: args.hf_token},
                    opts=child,
                )
            )
        if objects.router is not None:
            depends.append(
                k8s.core.v1.ConfigMap(
                    f"{name}-router",
                    metadata=objects.router["metadata"],
                    data=objects.router["data"],
                    opts=child,
                )
            )
        manifest = objects.rayservice
        if args.gcs_address is not None:
            manifest = with_gcs_address(manifest, args.gcs_address)
        service = k8s.apiextensions.CustomResource(
            f"{name}-rayservice",
            api_version=manifest["apiVersion"],
            kind=manifest["kind"],
            metadata=manifest["metadata"],
            spec=manifest["spec"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=depends),
        )
        for budget in objects.disruption_budgets:
            k8s.policy.v1.PodDisruptionBudget(
                f"{name}-pdb-{budget['metadata']['name'].removeprefix(resource_name(spec) + '-')}",
                metadata=budget["metadata"],
                spec=budget["spec"],
                opts=child,
            )
        ingress = objects.ingress
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


def _account(
    name: str, account: dict[str, Any], opts: pulumi.ResourceOptions
) -> k8s.core.v1.ServiceAccount:
    return k8s.core.v1.ServiceAccount(
        name,
        metadata=account["metadata"],
        automount_service_account_token=account.get("automountServiceAccountToken"),
        opts=opts,
    )
