"""KubeRayOperator: the KubeRay operator from its pinned Helm chart, on the system pool."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from infra.kube.manifests import (
    kuberay_values,
)
from infra.kube.namespaces import KUBERAY_NAMESPACE
from serving.catalog.pins import KUBERAY_CHART


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
            chart=KUBERAY_CHART.name,
            version=KUBERAY_CHART.version,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=KUBERAY_CHART.repository),
            namespace=namespace.metadata["name"],
            values=kuberay_values(),
            atomic=True,
            opts=child,
        )
        self.namespace = release.namespace
        self.register_outputs({"namespace": self.namespace})
