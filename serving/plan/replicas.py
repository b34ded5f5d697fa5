"""The replica groups of a spec: which groups of identical replicas serve it, each with its role,
parallelism and autoscaling bounds.

The one place that decides them: the planner plans each group, the compiler writes one LLMConfig
per group, and the autoscaling knobs start from each group's bounds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from serving.spec.parts import Autoscaling, Parallelism
from serving.spec.profile import ModelSpec

Role = Literal["server", "prefill", "decode"]


@dataclass(frozen=True)
class ReplicaGroup:
    """One group of identical replicas: the server, or the prefill or decode side of a pair."""

    role: Role
    parallelism: Parallelism
    autoscaling: Autoscaling


def replica_groups(spec: ModelSpec) -> list[ReplicaGroup]:
    """One server group; with prefill/decode disaggregation, a prefill and a decode group, each
    with the profile's parallelism unless the side sets its own."""
    if spec.disaggregation is None:
        return [ReplicaGroup("server", spec.parallelism, spec.autoscaling)]
    pd = spec.disaggregation
    return [
        ReplicaGroup("prefill", pd.prefill.parallelism or spec.parallelism, pd.prefill.autoscaling),
        ReplicaGroup("decode", pd.decode.parallelism or spec.parallelism, pd.decode.autoscaling),
    ]


def replica_group(spec: ModelSpec, role: Role) -> ReplicaGroup:
    """The spec's group of this role."""
    return next(group for group in replica_groups(spec) if group.role == role)
