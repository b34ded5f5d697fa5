"""The stack's answers to faults, worked out from its GPU pools: how long each pool's pods have
between being told to stop and being killed, and what the RayService manifests need of it
(`infra.kube.disruption.Resilience`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.kube.disruption import (
    DRAIN_MARGIN_S,
    GCS_ADDRESS_UNRESOLVED,
    Resilience,
    WeightsCache,
)
from infra.platform.capacity_config import GpuPoolOptions
from serving.compile.scheduling import SPOT_CRITICAL_PODS_S, SPOT_POD_NOTICE_S


def pool_notice_s(options: GpuPoolOptions | None, stream_timeout_s: int) -> int:
    """How long a pod on this pool has between being told to stop and being killed; on a
    capacity chain, the shortest any of its steps gives (a Spot step's)."""
    chained_spot = options is not None and any(s.mode == "spot" for s in options.capacity)
    if options is not None and (options.spot or chained_spot):
        if options.spot_shutdown_grace_s is not None:
            return options.spot_shutdown_grace_s - SPOT_CRITICAL_PODS_S
        return SPOT_POD_NOTICE_S
    return stream_timeout_s + DRAIN_MARGIN_S


def resilience_for(
    gpu_pools: Mapping[str, GpuPoolOptions],
    *,
    stream_timeout_s: int,
    weights_cache: WeightsCache = "pod",
    gcs_address: Any = GCS_ADDRESS_UNRESOLVED,
) -> Resilience:
    return Resilience(
        gcs_address=gcs_address,
        stream_timeout_s=stream_timeout_s,
        notice_s={
            machine: pool_notice_s(options, stream_timeout_s)
            for machine, options in gpu_pools.items()
        },
        weights_cache=weights_cache,
    )
