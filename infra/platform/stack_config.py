"""The stack's configuration as typed models: `StackConfig` (the `servestack:` keys, named as its
fields), `GcpConfig` (the `gcp:` keys servestack reads) and the maintenance exclusions; the GPU
pool options and their capacity chains are in `infra.platform.capacity_config`. Here a value is
checked on its own (a type, a known machine type); what must hold between values and the models'
plans is checked when the platform is planned (`infra/platform/plan.py`).
`infra.platform.config` reads stack files into these models."""

from __future__ import annotations

import re
from datetime import datetime
from ipaddress import IPv4Network
from typing import Annotated, Literal

from pydantic import Field, Strict, field_validator, model_validator

from infra.kube.disruption import WeightsCache
from infra.platform.capacity_config import GpuPoolOptions
from serving import catalog
from serving.catalog.consumption import CONSUMPTION_MODES
from serving.catalog.ray_release import DEFAULT_RAY_IMAGE, RAY_FLOOR, image_ray_version
from serving.errors import FixableValueError
from serving.frozen import Frozen, StrictFrozen
from serving.spec import names

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_CHANNEL = re.compile(r"^projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/notificationChannels/[0-9]+$")

NAMESPACE = "servestack"
GCP_NAMESPACE = "gcp"
DEFAULT_STACK = "dev"

ReleaseChannel = Literal["RAPID", "REGULAR", "STABLE"]
KubeRayInstall = Literal["helm", "gke_addon"]
# The stack's models are strict (no `true` for a count, no "2" for a number); a CIDR block is
# written as text and parsed.
Cidr = Annotated[IPv4Network, Strict(False)]
_LABEL = r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"
_HOST_NAME = re.compile(rf"(\*\.)?{_LABEL}(\.{_LABEL})*")
_IMAGE_REFERENCE = re.compile(r"[a-z0-9][a-z0-9._/:@-]*")
RedisTier = Literal["BASIC", "STANDARD_HA"]
ExclusionScope = Literal["NO_UPGRADES", "NO_MINOR_UPGRADES", "NO_MINOR_OR_NODE_UPGRADES"]

# Read by the program only, from Pulumi's encrypted config (`load_pulumi_secrets`).
SECRET_KEYS = frozenset({"api_keys", "tls_cert", "tls_key", "hf_token"})


class MaintenanceExclusion(Frozen):
    """A window in which GKE starts no upgrade of the kinds `scope` names (a release, a
    launch). GKE applies exclusions to the whole cluster; NO_MINOR_OR_NODE_UPGRADES keeps every
    node pool, the system pool with the Ray heads included, as it is."""

    name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,62}$", description="The exclusion's name.")
    start_time: datetime = Field(description="RFC 3339 start, e.g. 2026-12-20T00:00:00Z.")
    end_time: datetime = Field(description="RFC 3339 end.")
    scope: ExclusionScope = Field(
        default="NO_MINOR_OR_NODE_UPGRADES", description="What GKE holds back meanwhile."
    )

    @model_validator(mode="after")
    def _ordered(self) -> MaintenanceExclusion:
        if self.end_time <= self.start_time:
            raise FixableValueError(
                f"the exclusion '{self.name}' ends ({self.end_time.isoformat()}) before it "
                f"starts ({self.start_time.isoformat()})",
                "give an end_time after start_time",
                field="end_time",
            )
        return self


class StackConfig(StrictFrozen):
    """The `servestack:` keys of a stack file."""

    models: list[str] = Field(
        min_length=1,
        description="Model profiles to serve: file names in stacks/models/ without .yaml.",
    )
    prices: dict[str, float] = Field(
        default_factory=dict,
        description="USD per node-hour overriding the catalog's prices: <machine type> for its "
        "list (and reservation) rate, <machine type>:<mode> for one way of obtaining nodes "
        "(spot, flex_start, reservation, on_demand).",
    )
    gpu_pools: dict[str, GpuPoolOptions] = Field(
        default_factory=dict,
        description="Provisioning options per GPU machine type the models' plans use.",
    )
    cluster_zone: str | None = Field(
        default=None,
        description="A zone of gcp:region for a zonal cluster; unset, the cluster is regional.",
    )
    release_channel: ReleaseChannel = Field(
        default="REGULAR", description="GKE release channel: RAPID, REGULAR or STABLE."
    )
    master_authorized_networks: list[Cidr] = Field(
        default_factory=list,
        description="CIDR blocks that may reach the control plane's public endpoint; none by "
        "default.",
    )
    allow_public_control_plane: bool = Field(
        default=False,
        description="Must be true for master_authorized_networks to hold a block wider than a "
        "/8 (0.0.0.0/0 included); the cluster is then labelled so the policy pack accepts it.",
    )
    deletion_protection: bool = Field(
        default=True, description="Refuse to delete the cluster (set false for throwaway stacks)."
    )
    subnet_cidr: Cidr = Field(
        default=IPv4Network("10.0.0.0/20"), description="Primary range of the nodes' subnet."
    )
    pods_cidr: Cidr = Field(
        default=IPv4Network("10.4.0.0/14"), description="Secondary range for pod IPs."
    )
    services_cidr: Cidr = Field(
        default=IPv4Network("10.8.0.0/20"), description="Secondary range for Service IPs."
    )
    control_plane_cidr: Cidr = Field(
        default=IPv4Network("172.16.0.0/28"), description="The /28 GKE gives the control plane."
    )
    system_machine_type: str = Field(
        default="e2-standard-4",
        description="CPU machine type of the system pool (Ray heads, ingress, operators).",
    )
    system_min_nodes: int = Field(default=1, ge=0, description="System pool minimum, in total.")
    system_max_nodes: int = Field(default=3, ge=1, description="System pool maximum, in total.")
    maintenance_window_start: str = Field(
        default="03:00", description="Daily maintenance window start, HH:MM in UTC."
    )
    ray_image: str = Field(
        default=DEFAULT_RAY_IMAGE,
        description=f"Ray image of every RayService, its tag starting with the Ray version "
        f"({RAY_FLOOR} or newer with direct streaming and the prefix router: the policy pack "
        "checks).",
    )
    kuberay_install: KubeRayInstall = Field(
        default="helm",
        description="helm: the kuberay-operator chart, pinned; gke_addon: GKE's Ray Operator.",
    )
    require_image_digest: bool = Field(
        default=False,
        description="Refuse a ray_image without an @sha256: digest, so every pod runs the bytes "
        "that were reviewed, not whatever the tag points at today.",
    )
    binary_authorization: bool = Field(
        default=True,
        description="Enforce the project's Binary Authorization policy on the cluster "
        "(PROJECT_SINGLETON_POLICY_ENFORCE); false also needs the policy "
        "platform-cluster-binary-authorization switched off.",
    )
    ray_token_generation: int = Field(
        default=0,
        ge=0,
        description="Raise it to rotate every model's Ray auth token: each RayService brings "
        "up a new cluster, whose token KubeRay generates, and retires the old one.",
    )
    edge_host: str | None = Field(
        default=None, description="Host name the edge answers for; unset, any host."
    )
    edge_internal: bool = Field(
        default=True, description="An internal load balancer (VPC only); false for the internet."
    )
    edge_source_ranges: list[Cidr] = Field(
        default_factory=list,
        description="CIDR blocks allowed to reach the edge load balancer; required when the "
        "edge is public (edge_internal: false).",
    )
    edge_replicas: int = Field(
        default=2, ge=2, le=20, description="HAProxy edge replicas (two or more, for upgrades)."
    )
    edge_rate_limit_rps: int = Field(
        default=20, ge=1, description="Requests per second one client may send a model."
    )
    stream_timeout_s: int = Field(
        default=600, ge=30, le=7200, description="Longest a streamed answer may run, seconds."
    )
    gcs_redis_tier: RedisTier = Field(
        default="STANDARD_HA",
        description="Memorystore tier of the Redis holding the Ray heads' GCS state: "
        "STANDARD_HA (a replica, automatic failover) or BASIC (one node, for dev).",
    )
    gcs_redis_memory_gb: int = Field(
        default=1, ge=1, le=300, description="Memorystore capacity, GB (GCS state is small)."
    )
    weights_cache: WeightsCache = Field(
        default="pod",
        description="pod: the Hugging Face cache lives and dies with the worker pod; node: on "
        "the node's local SSD, so a pod restarted on the same node loads warm.",
    )
    maintenance_exclusions: list[MaintenanceExclusion] = Field(
        default_factory=list,
        description="Windows in which GKE upgrades nothing the scope names (cluster-wide, "
        "system pool included).",
    )
    alert_emails: list[str] = Field(
        default_factory=list,
        description="Email addresses the alert policies notify (one notification channel each).",
    )
    alert_channels: list[str] = Field(
        default_factory=list,
        description="Existing Cloud Monitoring notification channels the alert policies notify, "
        "as projects/<project>/notificationChannels/<id> (Slack, PagerDuty, ...).",
    )

    @field_validator("alert_emails")
    @classmethod
    def _emails(cls, emails: list[str]) -> list[str]:
        for email in emails:
            if not _EMAIL.match(email):
                raise FixableValueError(
                    f"'{email}' is not an email address",
                    "use name@example.com",
                    field="alert_emails",
                )
        return emails

    @field_validator("alert_channels")
    @classmethod
    def _channels(cls, channels: list[str]) -> list[str]:
        for channel in channels:
            if not _CHANNEL.match(channel):
                raise FixableValueError(
                    f"'{channel}' is not a notification channel's name",
                    "use projects/<project>/notificationChannels/<id>, as `gcloud beta "
                    "monitoring channels list --format='value(name)'` prints it",
                    field="alert_channels",
                )
        return channels

    @field_validator("edge_host")
    @classmethod
    def _host_name(cls, host: str | None) -> str | None:
        # The host reaches the edge's HAProxy configuration through the Ingress: only a DNS
        # name may go there.
        if host is not None and not _HOST_NAME.fullmatch(host):
            raise FixableValueError(
                f"{host!r} is not a DNS host name",
                "use a name such as llm.example.com (lower case, digits, '-' and '.'), or a "
                "wildcard such as *.example.com",
            )
        return host

    @field_validator("models")
    @classmethod
    def _plain_unique_names(cls, models: list[str]) -> list[str]:
        for index, model in enumerate(models):
            try:
                names.check_profile_name(model)
            except FixableValueError as exc:
                raise FixableValueError(exc.problem, exc.fix, field=str(index)) from None
            if model in models[:index]:
                raise FixableValueError(
                    f"'{model}' is listed twice", "list each model once", field=str(index)
                )
        return models

    @model_validator(mode="after")
    def _pinned_image(self) -> StackConfig:
        if self.require_image_digest and "@sha256:" not in self.ray_image:
            raise FixableValueError(
                f"require_image_digest is true and ray_image '{self.ray_image}' names a tag only",
                f"pin it: {self.ray_image}@sha256:<digest> (docker buildx imagetools inspect "
                "prints the digest)",
                field="ray_image",
            )
        return self

    @model_validator(mode="after")
    def _public_edge_has_source_ranges(self) -> StackConfig:
        if not self.edge_internal and not self.edge_source_ranges:
            raise FixableValueError(
                "edge_internal: false puts the edge on the internet, and edge_source_ranges is "
                "empty, so it would answer every address",
                "list the client CIDR blocks in servestack:edge_source_ranges (e.g. "
                "[203.0.113.0/24]), or keep edge_internal: true",
                field="edge_source_ranges",
            )
        return self

    @field_validator("ray_image")
    @classmethod
    def _ray_floor(cls, image: str) -> str:
        if not _IMAGE_REFERENCE.fullmatch(image):
            raise FixableValueError(
                f"{image!r} is not a container image reference",
                f"use a reference such as {DEFAULT_RAY_IMAGE}, without spaces or line breaks",
            )
        if image_ray_version(image) is None:
            raise FixableValueError(
                f"'{image}' carries no Ray version in its tag",
                f"use a tag that starts with the Ray version, e.g. {DEFAULT_RAY_IMAGE}",
            )
        return image

    @field_validator("prices")
    @classmethod
    def _known_machines(cls, prices: dict[str, float]) -> dict[str, float]:
        for key, price in prices.items():
            name, _, mode = key.partition(":")
            try:
                catalog.machine_type(name)
            except FixableValueError as exc:
                raise FixableValueError(exc.problem, exc.fix, field=key) from None
            if mode and mode not in CONSUMPTION_MODES:
                raise FixableValueError(
                    f"'{mode}' is not a way of obtaining nodes",
                    f"write {name} (the list and reservation rate) or {name}:<mode>, <mode> one "
                    f"of {', '.join(CONSUMPTION_MODES)}",
                    field=key,
                )
            if price <= 0:
                raise ValueError(f"price for {key} must be positive")
        return prices

    @field_validator("gpu_pools")
    @classmethod
    def _known_gpu_machines(cls, pools: dict[str, GpuPoolOptions]) -> dict[str, GpuPoolOptions]:
        for name in pools:
            try:
                catalog.machine_type(name)
            except FixableValueError as exc:
                raise FixableValueError(exc.problem, exc.fix, field=name) from None
        return pools


class GcpConfig(Frozen):
    """The `gcp:` keys servestack reads; the Google provider reads them (and others) itself."""

    project: str | None = Field(default=None, description="GCP project id.")
    region: str | None = Field(default=None, description="GCP region, e.g. us-central1.")
