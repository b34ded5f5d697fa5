"""Builders for the component tests: a GPU pool spec on a catalog machine, the pool built under the
mock engine, and the field a validation error names."""

from __future__ import annotations

from typing import Any

from infra_support import RecordingMocks, Registered, run
from pydantic import ValidationError

from infra.deploy.components import (
    GpuNodePool,
    GpuNodePoolArgs,
)
from infra.platform.pool_specs import GpuPoolSpec
from serving import catalog
from serving.catalog import MachineType
from serving.errors import FixableValueError

NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
SA_EMAIL = "nodes@my-gcp-project.iam.gserviceaccount.com"


def pool_home(machine: MachineType) -> tuple[str, str]:
    """A region and zone that stock the machine's GPU, from the zone catalog."""
    region = catalog.regions_offering(machine.gke_accelerator)[0]
    return region, catalog.zones_offering(machine.gke_accelerator, region)[0]


def gpu_spec(machine_type: str = "a3-highgpu-8g", **changes: Any) -> GpuPoolSpec:
    machine = catalog.MACHINE_TYPES[machine_type]
    region, zone = pool_home(machine)
    fields: dict[str, Any] = {
        "machine_type": machine_type,
        "region": region,
        "zones": [zone],
        "min_nodes": 1,
        "max_nodes": 3,
        "spot": not machine.on_demand,
        "models": ("some-model",),
    }
    return GpuPoolSpec.model_validate(fields | changes)


def build_gpu_pool(mocks: RecordingMocks, spec: GpuPoolSpec) -> tuple[GpuNodePool, Registered]:
    args = GpuNodePoolArgs(
        spec=spec, cluster_id="cluster-id", cluster_location="us-central1", service_account=SA_EMAIL
    )
    pool = run(lambda: GpuNodePool("gpu", args))
    return pool, mocks.one(NODE_POOL)


def fixable_field(error: ValidationError) -> str | None:
    cause = (error.errors()[0].get("ctx") or {}).get("error")
    assert isinstance(cause, FixableValueError), error
    return cause.field
