"""ServingPlane: everything that runs on the cluster (its Kubernetes provider, the serving
namespace, the GCS Redis secrets, the KubeRay operator unless GKE's add-on runs it, the edge, and
one LlmService per compiled model)."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field

from infra.deploy.components.args import ComponentArgs
from infra.deploy.components.edge_ingress import EdgeIngress, EdgeIngressArgs
from infra.deploy.components.kuberay import KubeRayOperator
from infra.deploy.components.llm_service import LlmService, LlmServiceArgs
from infra.kube.disruption import (
    GCS_CA_CONFIGMAP,
    GCS_CA_KEY,
    GCS_PASSWORD_KEY,
    GCS_PASSWORD_SECRET,
)
from infra.kube.model_objects import ModelObjects
from infra.kube.namespaces import SERVING_NAMESPACE
from infra.kube.ray_security import default_deny
from infra.platform.config import ServingSecrets
from infra.platform.stack_config import StackConfig


class ServingPlaneArgs(ComponentArgs):
    objects: dict[str, ModelObjects] = Field(
        description="Each model's Kubernetes objects by profile name, as the stack lists them."
    )
    compute_classes: tuple[dict[str, Any], ...] = Field(
        default=(), description="The stack's ComputeClasses (one per capacity chain), as built."
    )
    gcs_address: Any = Field(description="pulumi.Output[str]: the GCS store's address.")
    gcs_auth: Any = Field(description="pulumi.Output[str], secret: the GCS Redis AUTH string.")
    gcs_ca_certificate: Any = Field(description="pulumi.Output[str]: Memorystore's server CA.")
    project: str
    config: StackConfig
    secrets: ServingSecrets
    kubeconfig: Any = Field(description="pulumi.Output[str], secret: the cluster to deploy to.")


class ServingPlane(pulumi.ComponentResource):
    """Everything that runs on the cluster: its Kubernetes provider, the serving namespace, the
    KubeRay operator (unless GKE's add-on runs it), the edge, and one LlmService per model."""

    rayservices: pulumi.Output[dict[str, str]]
    # The cluster's Kubernetes provider, for components that put more objects on it.
    provider: k8s.Provider

    def __init__(
        self, name: str, args: ServingPlaneArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("servestack:serving:ServingPlane", name, None, opts)
        config, secrets = args.config, args.secrets
        provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=args.kubeconfig,
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.provider = provider
        on_cluster = pulumi.ResourceOptions(parent=self, providers=[provider])
        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace", metadata={"name": SERVING_NAMESPACE}, opts=on_cluster
        )
        in_namespace = pulumi.ResourceOptions(
            parent=self, providers=[provider], depends_on=[namespace]
        )
        deny = default_deny(SERVING_NAMESPACE)
        ready: list[pulumi.Resource] = [
            namespace,
            # The heads read the GCS Redis password from here (secretKeyRef), never from a value.
            k8s.core.v1.Secret(
                f"{name}-gcs-auth",
                metadata={"name": GCS_PASSWORD_SECRET, "namespace": SERVING_NAMESPACE},
                string_data={GCS_PASSWORD_KEY: pulumi.Output.secret(args.gcs_auth)},
                opts=in_namespace,
            ),
            k8s.core.v1.ConfigMap(
                f"{name}-gcs-ca",
                metadata={"name": GCS_CA_CONFIGMAP, "namespace": SERVING_NAMESPACE},
                data={GCS_CA_KEY: args.gcs_ca_certificate},
                opts=in_namespace,
            ),
            k8s.networking.v1.NetworkPolicy(
                f"{name}-default-deny",
                metadata=deny["metadata"],
                spec=deny["spec"],
                opts=pulumi.ResourceOptions(
                    parent=self, providers=[provider], depends_on=[namespace]
                ),
            ),
        ]
        # Cluster-scoped, before the workers that select them.
        ready += [
            k8s.apiextensions.CustomResource(
                f"{name}-{manifest['metadata']['name']}",
                api_version=manifest["apiVersion"],
                kind=manifest["kind"],
                metadata=manifest["metadata"],
                spec=manifest["spec"],
                opts=on_cluster,
            )
            for manifest in args.compute_classes
        ]
        if config.kuberay_install == "helm":
            ready.append(KubeRayOperator(f"{name}-kuberay", on_cluster))
        ready.append(
            EdgeIngress(
                f"{name}-edge",
                EdgeIngressArgs(
                    replicas=config.edge_replicas,
                    internal=config.edge_internal,
                    source_ranges=[str(block) for block in config.edge_source_ranges],
                    stream_timeout_s=config.stream_timeout_s,
                    api_keys=secrets.api_keys,
                    tls_cert=secrets.tls_cert,
                    tls_key=secrets.tls_key,
                ),
                on_cluster,
            )
        )
        after = pulumi.ResourceOptions(parent=self, providers=[provider], depends_on=ready)
        services = {
            model: LlmService(
                f"{name}-{model}",
                LlmServiceArgs(
                    objects=objects,
                    project=args.project,
                    gcs_address=args.gcs_address,
                    hf_token=secrets.hf_token,
                ),
                after,
            )
            for model, objects in args.objects.items()
        }
        self.rayservices = pulumi.Output.all(
            **{model: service.rayservice_name for model, service in services.items()}
        )
        self.register_outputs({"rayservices": self.rayservices})
