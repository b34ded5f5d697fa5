"""The serving side of the cluster: the KubeRay operator, the HAProxy edge ingress, and one
LlmService (a RayService and the objects around it) per model.

Manifests come from `infra/manifests.py`, built from serving's compiled outputs; these
components only register them, with secrets from Pulumi secrets turned into Kubernetes Secrets.
"""

from __future__ import annotations

from ipaddress import IPv4Network
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s
from pydantic import BaseModel, ConfigDict, Field

from infra.config import ServingSecrets, StackConfig
from infra.disruption import (
    GCS_CA_CONFIGMAP,
    GCS_CA_KEY,
    GCS_PASSWORD_KEY,
    GCS_PASSWORD_SECRET,
    Resilience,
    disruption_budgets,
)
from infra.edge import (
    API_KEYS_CONFIGMAP,
    API_KEYS_PATTERN,
    EDGE_CHART,
    EDGE_CHART_VERSION,
    EDGE_REPO,
    EDGE_TLS_SECRET,
    api_key_hashes,
    edge_pod_monitoring,
    edge_values,
    model_ingress,
)
from infra.manifests import (
    HF_TOKEN_KEY,
    hf_secret_name,
    kuberay_values,
    rayservice,
    resource_name,
    router_configmap,
    serve_service_name,
    service_account_name,
    ships_router,
    worker_service_account_name,
)
from infra.namespaces import EDGE_NAMESPACE, KUBERAY_NAMESPACE, SERVING_NAMESPACE
from infra.ray_security import default_deny, model_network_policy
from serving.compiler import CompiledModel, gcs_weights
from serving.names import gcp_account_id

KUBERAY_CHART = "kuberay-operator"
KUBERAY_CHART_VERSION = "1.7.0"
KUBERAY_REPO = "https://ray-project.github.io/kuberay-helm/"


class _Args(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)


class KubeRayOperator(pulumi.ComponentResource):
    """The KubeRay operator from its pinned chart, on the system pool. Helm creates the CRDs
    (about 1 MB each) with create, not client-side apply, so no last-applied annotation has to
    hold them; the provider applies everything else server-side."""

    namespace: pulumi.Output[str | None]

    def __init__(self, name: str, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("servestack:serving:KubeRayOperator", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace", metadata={"name": KUBERAY_NAMESPACE}, opts=child
        )
        release = k8s.helm.v3.Release(
            f"{name}-chart",
            chart=KUBERAY_CHART,
            version=KUBERAY_CHART_VERSION,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=KUBERAY_REPO),
            namespace=namespace.metadata["name"],
            values=kuberay_values(),
            atomic=True,
            opts=child,
        )
        self.namespace = release.namespace
        self.register_outputs({"namespace": self.namespace})


class EdgeIngressArgs(_Args):
    replicas: int = Field(ge=2)
    internal: bool
    source_ranges: list[str]
    stream_timeout_s: int
    api_keys: Any = Field(description="pulumi.Output[list[str]], secret.")
    tls_cert: Any = Field(description="pulumi.Output[str], secret.")
    tls_key: Any = Field(description="pulumi.Output[str], secret.")


class EdgeIngress(pulumi.ComponentResource):
    """HAProxy at the cluster edge: TLS from a Pulumi secret, API keys checked by hash, a
    LoadBalancer Service carrying only traffic ports, HAProxy's metrics scraped inside the
    cluster, two or more replicas with a PodDisruptionBudget."""

    namespace: pulumi.Output[str | None]

    def __init__(
        self, name: str, args: EdgeIngressArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("servestack:serving:EdgeIngress", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace", metadata={"name": EDGE_NAMESPACE}, opts=child
        )
        in_namespace = pulumi.ResourceOptions(parent=self, depends_on=[namespace])
        tls = k8s.core.v1.Secret(
            f"{name}-tls",
            metadata={"name": EDGE_TLS_SECRET, "namespace": EDGE_NAMESPACE},
            type="kubernetes.io/tls",
            string_data={"tls.crt": args.tls_cert, "tls.key": args.tls_key},
            opts=in_namespace,
        )
        keys = k8s.core.v1.ConfigMap(
            f"{name}-api-keys",
            metadata={"name": API_KEYS_CONFIGMAP, "namespace": EDGE_NAMESPACE},
            data={API_KEYS_PATTERN: pulumi.Output.secret(args.api_keys).apply(api_key_hashes)},
            opts=in_namespace,
        )
        release = k8s.helm.v3.Release(
            f"{name}-chart",
            chart=EDGE_CHART,
            version=EDGE_CHART_VERSION,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=EDGE_REPO),
            namespace=EDGE_NAMESPACE,
            values=edge_values(
                replicas=args.replicas,
                internal=args.internal,
                source_ranges=args.source_ranges,
                stream_timeout_s=args.stream_timeout_s,
            ),
            atomic=True,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[tls, keys]),
        )
        monitoring = edge_pod_monitoring()
        k8s.apiextensions.CustomResource(
            f"{name}-metrics",
            api_version=monitoring["apiVersion"],
            kind=monitoring["kind"],
            metadata=monitoring["metadata"],
            spec=monitoring["spec"],
            opts=in_namespace,
        )
        self.namespace = release.namespace
        self.register_outputs({"namespace": self.namespace})


class LlmServiceArgs(_Args):
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


class ServingPlaneArgs(_Args):
    models: dict[str, CompiledModel] = Field(
        description="Compiled models by profile name, as the stack lists them."
    )
    resilience: Resilience
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
                    model=compiled,
                    project=args.project,
                    image=config.ray_image,
                    host=config.edge_host,
                    requests_per_second=config.edge_rate_limit_rps,
                    stream_timeout_s=config.stream_timeout_s,
                    hf_token=secrets.hf_token,
                    operator_namespace=(
                        KUBERAY_NAMESPACE if config.kuberay_install == "helm" else None
                    ),
                    cluster_ranges=[config.subnet_cidr, config.pods_cidr, config.services_cidr],
                    token_generation=config.ray_token_generation,
                    resilience=args.resilience,
                ),
                after,
            )
            for model, compiled in args.models.items()
        }
        self.rayservices = pulumi.Output.all(
            **{model: service.rayservice_name for model, service in services.items()}
        )
        self.register_outputs({"rayservices": self.rayservices})
