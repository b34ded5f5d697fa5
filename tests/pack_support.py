"""Judging one profile's RayService by the policy pack's topology policies, as `servestack
preview` would, without running the whole program."""

from __future__ import annotations

from compiled_support import deployable
from pulumi_policy import EnforcementLevel, ResourceValidationPolicy

from infra.deploy.preview import Registered, judge
from infra.kube.manifests import rayservice
from policies.topology import TOPOLOGY_POLICIES
from policies.views import RAYSERVICE
from serving.catalog.ray_release import DEFAULT_RAY_IMAGE
from serving.spec.profile import ModelSpec

RESOURCE_POLICIES = [p for p in TOPOLOGY_POLICIES if isinstance(p, ResourceValidationPolicy)]


def pack_refusals(spec: ModelSpec) -> list[str]:
    """The pack's mandatory topology verdicts on the RayService the spec compiles to."""
    manifest = rayservice(deployable(spec), DEFAULT_RAY_IMAGE)
    resource = Registered(
        urn=f"urn:pulumi:test::servestack::{RAYSERVICE}::generated",
        type=RAYSERVICE, name="generated", parent="", custom=True, inputs=manifest,
    )  # fmt: skip
    return [
        f"{v.policy}: {v.message}"
        for v in judge([resource], list(RESOURCE_POLICIES))
        if v.enforcement == EnforcementLevel.MANDATORY.value
    ]
