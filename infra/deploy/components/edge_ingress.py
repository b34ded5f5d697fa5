"""EdgeIngress: the HAProxy ingress at the cluster's edge (TLS, API keys by hash, metrics).

Its values and objects come from `infra/kube/edge.py`; this component only registers them."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field

from infra.deploy.components.args import ComponentArgs
from infra.kube.edge import (
    API_KEYS_CONFIGMAP,
    API_KEYS_PATTERN,
    EDGE_TLS_SECRET,
    api_key_hashes,
    edge_pod_monitoring,
    edge_values,
)
from infra.kube.namespaces import EDGE_NAMESPACE
from serving.catalog.pins import EDGE_CHART


class EdgeIngressArgs(ComponentArgs):
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
            chart=EDGE_CHART.name,
            version=EDGE_CHART.version,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=EDGE_CHART.repository),
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
