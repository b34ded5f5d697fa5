"""The frozen specs of the platform's network and cluster (the node pools' are in
`infra.platform.pool_specs`). Each spec's validators hold that component's invariants (private,
disjoint ranges; a zonal cluster's zone in the region; a control plane never open to the world);
a stack that breaks one gets a `ServestackError` naming the file, the key and a fix.
`infra.platform.plan` derives the specs from a stack; the components in
`infra/deploy/components/` turn them into resources."""

from __future__ import annotations

import re
from ipaddress import IPv4Network
from itertools import combinations

from pydantic import field_validator, model_validator

from infra.platform.stack_config import (
    NAMESPACE,
    KubeRayInstall,
    MaintenanceExclusion,
    ReleaseChannel,
)
from serving import catalog
from serving.errors import FixableValueError
from serving.frozen import Frozen
from serving.spec.exposure import SMALLEST_AUTHORIZED_PREFIX, too_wide

_ZONE = re.compile(r"^[a-z]+-[a-z]+[0-9]+-[a-z]$")
_CLOCK = re.compile(r"^([01][0-9]|2[0-3]):[0-5][0-9]$")


class NetworkSpec(Frozen):
    """The VPC: one subnet in the region, with secondary ranges for pods and services.

    Invariants: every range is private (RFC 1918), no two ranges overlap, and the control
    plane's range is the /28 GKE requires.
    """

    region: str
    subnet_cidr: IPv4Network
    pods_cidr: IPv4Network
    services_cidr: IPv4Network
    control_plane_cidr: IPv4Network

    @model_validator(mode="after")
    def _private_and_disjoint(self) -> NetworkSpec:
        ranges = {
            "subnet_cidr": self.subnet_cidr,
            "pods_cidr": self.pods_cidr,
            "services_cidr": self.services_cidr,
            "control_plane_cidr": self.control_plane_cidr,
        }
        for name, cidr in ranges.items():
            if not cidr.is_private:
                raise FixableValueError(
                    f"{cidr} is not a private range; nodes, pods and services stay off the "
                    "internet",
                    "use a range inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16",
                    field=name,
                )
        for (one, first), (other, second) in combinations(ranges.items(), 2):
            if first.overlaps(second):
                raise FixableValueError(
                    f"{first} overlaps {other} ({second})",
                    f"give {one} and {other} disjoint ranges",
                    field=one,
                )
        if self.control_plane_cidr.prefixlen != 28:
            raise FixableValueError(
                f"{self.control_plane_cidr} is a /{self.control_plane_cidr.prefixlen}; GKE "
                "gives the control plane exactly a /28",
                "use a /28, e.g. 172.16.0.0/28",
                field="control_plane_cidr",
            )
        return self


class ClusterSpec(Frozen):
    """A private, regional or zonal GKE Standard cluster.

    Invariants: a zonal cluster's zone is in the region, and the control plane is never open to
    a block wider than `serving.spec.exposure` allows unless the stack says so explicitly.
    """

    project: str
    region: str
    cluster_zone: str | None = None
    release_channel: ReleaseChannel = "REGULAR"
    master_authorized_networks: tuple[IPv4Network, ...] = ()
    allow_public_control_plane: bool = False
    deletion_protection: bool = True
    maintenance_window_start: str = "03:00"
    maintenance_exclusions: tuple[MaintenanceExclusion, ...] = ()
    kuberay_install: KubeRayInstall = "helm"
    binary_authorization: bool = True

    @field_validator("maintenance_window_start")
    @classmethod
    def _clock(cls, value: str) -> str:
        if not _CLOCK.fullmatch(value):
            raise FixableValueError(
                f"'{value}' is not a time of day", "write HH:MM in UTC, e.g. '03:00'"
            )
        return value

    @model_validator(mode="after")
    def _located_and_closed(self) -> ClusterSpec:
        zone = self.cluster_zone
        outside = zone is not None and catalog.region_of(zone) != self.region
        if zone is not None and (not _ZONE.fullmatch(zone) or outside):
            raise FixableValueError(
                f"'{zone}' is not a zone of gcp:region {self.region}",
                f"use a zone such as {self.region}-a, or unset it for a regional cluster",
                field="cluster_zone",
            )
        wide = too_wide(self.master_authorized_networks)
        if wide and not self.allow_public_control_plane:
            raise FixableValueError(
                f"{wide[0]} opens the control plane to a /{wide[0].prefixlen}, wider than the "
                f"/{SMALLEST_AUTHORIZED_PREFIX} the policy pack accepts: as good as the internet",
                "list the CIDR blocks of your offices, VPN or CI runners instead (e.g. "
                "203.0.113.7/32); if you really mean it, also set "
                f"{NAMESPACE}:allow_public_control_plane: true",
                field="master_authorized_networks",
            )
        return self

    @property
    def location(self) -> str:
        """Where GKE runs the control plane: the zone of a zonal cluster, else the region."""
        return self.cluster_zone or self.region
