"""The replica groups of a spec: which groups of identical replicas serve it, each with its role,
parallelism, GPUs per replica and replica bounds.

The one place that decides them, once per plan: `replica_groups(spec)` is called by the planner
alone, which keeps each `ReplicaGroup` in its `GroupPlan`; the compiler (one LLMConfig per group,
the autoscaling knobs, the worker pods) and everything after it read those same objects from the
plan instead of splitting the spec into sides again.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from serving.frozen import Frozen
from serving.spec.parts import Autoscaling, Parallelism
from serving.spec.profile import ModelSpec

Role = Literal["server", "prefill", "decode"]


class ReplicaGroup(Frozen):
    """One group of identical replicas: the server, or the prefill or decode side of a pair."""

    role: Role
    parallelism: Parallelism = Field(description="The layout of one replica of the group.")
    autoscaling: Autoscaling = Field(
        description="The group's replica bounds and any autoscaling knob its profile sets."
    )

    @property
    def gpus_per_replica(self) -> int:
        """GPUs one replica takes: tensor x pipeline x data."""
        return self.parallelism.gpus_per_replica

    @property
    def min_replicas(self) -> int:
        """Replicas (for a data-parallel group: DP groups) the group never goes below."""
        return self.autoscaling.min_replicas

    @property
    def max_replicas(self) -> int:
        """Replicas (for a data-parallel group: DP groups) the group may scale to."""
        return self.autoscaling.max_replicas


def replica_groups(spec: ModelSpec) -> list[ReplicaGroup]:
    """One server group; with prefill/decode disaggregation, a prefill and a decode group, each
    with the profile's parallelism unless the side sets its own."""
    if spec.disaggregation is None:
        return [
            ReplicaGroup(role="server", parallelism=spec.parallelism, autoscaling=spec.autoscaling)
        ]
    pd = spec.disaggregation
    return [
        ReplicaGroup(
            role="prefill",
            parallelism=pd.prefill.parallelism or spec.parallelism,
            autoscaling=pd.prefill.autoscaling,
        ),
        ReplicaGroup(
            role="decode",
            parallelism=pd.decode.parallelism or spec.parallelism,
            autoscaling=pd.decode.autoscaling,
        ),
    ]
