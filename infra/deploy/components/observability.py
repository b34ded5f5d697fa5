"""Observability: what the serving plane is scraped from, the stack's dashboard and its alerts.

The objects come from `infra/platform/monitoring.py`; this component registers them: PodMonitorings
on the cluster (GKE's managed Prometheus collects them), one Cloud Monitoring dashboard, an email
notification channel per address in the stack config, and one alert policy per rule, notifying
those channels and any the stack names.
"""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s
from pydantic import Field

from infra.deploy.components.args import ComponentArgs
from infra.platform.alerts import AlertRule, alert_rules, gpu_node_minimums
from infra.platform.monitoring import dashboard, pod_monitorings
from infra.platform.pool_specs import GpuPoolSpec
from infra.platform.promql import resource_name_of
from infra.platform.stack_config import StackConfig
from serving.compile.compiler import CompiledModel

# Cloud Monitoring evaluates a PromQL condition this often.
EVALUATION_INTERVAL = "60s"


class ObservabilityArgs(ComponentArgs):
    stack: str
    project: str
    models: dict[str, CompiledModel] = Field(
        description="Compiled models by profile name, as the stack lists them."
    )
    gpu_pools: tuple[GpuPoolSpec, ...]
    config: StackConfig
    provider: Any = Field(description="The cluster's Kubernetes provider.")


def alert_policy_args(rule: AlertRule, channels: list[Any]) -> dict[str, Any]:
    """An AlertPolicy's arguments for one rule. Metric validation is off: on the first
    `pulumi up` nothing has been scraped yet, and the metric-existence test proves the names."""
    return {
        "display_name": rule.title,
        "combiner": "OR",
        "severity": rule.severity,
        "conditions": [
            gcp.monitoring.AlertPolicyConditionArgs(
                display_name=rule.title,
                condition_prometheus_query_language=(
                    gcp.monitoring.AlertPolicyConditionConditionPrometheusQueryLanguageArgs(
                        query=rule.query,
                        duration=f"{rule.for_s}s",
                        evaluation_interval=EVALUATION_INTERVAL,
                        disable_metric_validation=True,
                    )
                ),
            )
        ],
        "documentation": gcp.monitoring.AlertPolicyDocumentationArgs(
            content=f"Runbook: {rule.runbook}", mime_type="text/markdown"
        ),
        "notification_channels": channels,
    }


class Observability(pulumi.ComponentResource):
    """PodMonitorings, the stack's dashboard, notification channels and alert policies."""

    dashboard_id: pulumi.Output[str]
    alert_policies: pulumi.Output[list[str]]

    def __init__(
        self, name: str, args: ObservabilityArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("servestack:observability:Observability", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        on_cluster = pulumi.ResourceOptions(parent=self, provider=args.provider)
        config = args.config
        for monitoring in pod_monitorings(kuberay_helm=config.kuberay_install == "helm"):
            meta = monitoring["metadata"]
            k8s.apiextensions.CustomResource(
                f"{name}-{meta['namespace']}-{meta['name']}",
                api_version=monitoring["apiVersion"],
                kind=monitoring["kind"],
                metadata=meta,
                spec=monitoring["spec"],
                opts=on_cluster,
            )
        models = list(args.models.values())
        board = gcp.monitoring.Dashboard(
            f"{name}-dashboard",
            project=args.project,
            dashboard_json=json.dumps(dashboard(args.stack, models)),
            opts=child,
        )
        channels: list[Any] = list(config.alert_channels)
        for email in config.alert_emails:
            channel = gcp.monitoring.NotificationChannel(
                f"{name}-email-{resource_name_of(email)}",
                project=args.project,
                type="email",
                display_name=f"servestack {args.stack}: {email}",
                labels={"email_address": email},
                opts=child,
            )
            channels.append(channel.name)
        policies = [
            gcp.monitoring.AlertPolicy(
                f"{name}-{rule.name}",
                project=args.project,
                **alert_policy_args(rule, channels),
                opts=child,
            )
            for rule in alert_rules(models, gpu_node_minimums(args.gpu_pools))
        ]
        self.dashboard_id = board.id
        self.alert_policies = pulumi.Output.all(*(policy.name for policy in policies))
        self.register_outputs(
            {"dashboard_id": self.dashboard_id, "alert_policies": self.alert_policies}
        )
