"""NodeServiceAccount: the identity GKE nodes run as, with only the roles nodes need.

Workloads get their own identities through Workload Identity; the node account only ships logs
and metrics and pulls images, so a compromised node cannot reach the project's data.
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp
from pydantic import Field

from serving.frozen import Frozen

# The minimum GKE documents for a node service account
# (https://cloud.google.com/kubernetes-engine/docs/how-to/hardening-your-cluster#use_least_privilege_sa),
# plus reading images from Artifact Registry.
NODE_ROLES: dict[str, str] = {
    "log-writer": "roles/logging.logWriter",
    "metric-writer": "roles/monitoring.metricWriter",
    "monitoring-viewer": "roles/monitoring.viewer",
    "metadata-writer": "roles/stackdriver.resourceMetadata.writer",
    "registry-reader": "roles/artifactregistry.reader",
}


class NodeServiceAccountArgs(Frozen):
    """Invariant: the account id is one GCP accepts (6-30 characters, a letter first)."""

    project: str
    account_id: str = Field(pattern=r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")


class NodeServiceAccount(pulumi.ComponentResource):
    """A least-privilege service account for the cluster's nodes."""

    email: pulumi.Output[str]

    def __init__(
        self, name: str, args: NodeServiceAccountArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("servestack:identity:NodeServiceAccount", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        account = gcp.serviceaccount.Account(
            f"{name}-account",
            project=args.project,
            account_id=args.account_id,
            display_name="servestack GKE nodes",
            opts=child,
        )
        for role_name, role in NODE_ROLES.items():
            gcp.projects.IAMMember(
                f"{name}-{role_name}",
                project=args.project,
                role=role,
                member=account.email.apply(lambda email: f"serviceAccount:{email}"),
                opts=child,
            )
        self.email = account.email
        self.register_outputs({"email": self.email})
