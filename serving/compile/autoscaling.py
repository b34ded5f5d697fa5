"""Ray Serve's autoscaling knobs for one replica group, derived from the model's plan.

Ray Serve 2.56 scales a deployment on requests in flight per replica (`target_ongoing_requests`),
caps what one replica accepts (`max_ongoing_requests`; the rest waits at the router, where another
replica can still take it), and waits `upscale_delay_s` / `downscale_delay_s` before acting.
A constant target is wrong for every model but one, so each knob comes from the plan:

- the target is the decode batch the planner says one replica (one DP rank) sustains with its
  inter-token latency within the profile's `latency.itl_ms` (a prefill-only replica: the prompts
  it can prefill one after another and still give each a first token within `latency.ttft_ms`);
- the cap adds to that batch the requests that can wait, at the rate the replica completes
  requests, and still see their first token within `latency.ttft_ms`;
- the delays scale with how long a new replica takes before it serves: a GPU node to start when
  the replica needs its own, its weights to fetch (Hugging Face or GCS FUSE) and copy to the GPUs,
  and vLLM's start-up (profiling, CUDA graphs).

Any knob the profile sets wins over the derived one.
"""

from __future__ import annotations

import math

from pydantic import Field

from serving.frozen import Frozen
from serving.plan.planner import GroupPlan, Plan, plan, weight_bytes, weight_bytes_per_gpu
from serving.plan.replicas import Role
from serving.spec.profile import ModelSpec

GB = 1e9
# Load-path figures. They are assumptions stated once, not measurements of this code: a GCE
# GPU node pulling from the Hugging Face CDN with hf_transfer reaches about 0.5 GB/s; Cloud
# Storage FUSE with parallel downloads and a local-SSD file cache about 1 GB/s per node (Google's
# GKE guidance for serving weights from a bucket); safetensors copied from the page cache to a GPU
# over PCIe at about 10 GB/s per GPU.
HUGGING_FACE_BYTES_PER_S = 0.5 * GB
GCS_FUSE_BYTES_PER_S = 1.0 * GB
HOST_TO_GPU_BYTES_PER_S = 10 * GB
# vLLM's start-up after the weights are in place: memory profiling, KV-cache allocation, CUDA
# graph capture and torch.compile (cached), about a minute in vLLM's start-up log on an H100.
ENGINE_START_S = 60.0
# A GPU node the cluster autoscaler adds: VM boot, driver install, the Ray image pulled (~10 GB).
GPU_NODE_START_S = 300.0

# Wait a tenth of the load time before adding a replica (10 s to 2 min): a blip starts no load,
# while a real rise starts the new replica early in the minutes it needs anyway.
UPSCALE_SHARE_OF_LOAD = 0.1
UPSCALE_DELAY_BOUNDS_S = (10.0, 120.0)
# Keep an idle replica for three load times, and never less than five minutes (Ray's default is
# ten whatever the model): a lull shorter than a reload should not cost one.
DOWNSCALE_LOADS = 3.0
MIN_DOWNSCALE_DELAY_S = 300.0


class AutoscalingChoice(Frozen):
    """One replica group's autoscaling knobs, and the figures they were derived from."""

    target_ongoing_requests: float = Field(description="Requests in flight per replica aimed at.")
    max_ongoing_requests: int = Field(description="Requests one replica accepts at most.")
    upscale_delay_s: float
    downscale_delay_s: float
    sustained_batch: int = Field(description="Sequences one replica decodes within latency.itl_ms.")
    queue_within_ttft: int = Field(
        description="Requests that can wait and still get a first token within latency.ttft_ms."
    )
    load_s: float = Field(description="Estimated seconds from asking for a replica to serving.")


def weights_source_bytes_per_s(spec: ModelSpec) -> float:
    """How fast a node fetches the weights from where the profile keeps them."""
    return GCS_FUSE_BYTES_PER_S if spec.weights_on_gcs else HUGGING_FACE_BYTES_PER_S


def replica_load_s(spec: ModelSpec, group: GroupPlan) -> float:
    """Seconds from the autoscaler asking for a replica until it serves: a node to start when a
    replica takes whole nodes (one sharing a node may land beside a running one), every node of
    the replica fetching the whole checkpoint, each GPU taking its shard, then vLLM's start-up."""
    where = group.placement
    node_start = GPU_NODE_START_S if where.replicas_per_node <= 1 else 0.0
    fetch = sum(weight_bytes(spec)) / weights_source_bytes_per_s(spec)
    copy = weight_bytes_per_gpu(spec, group.parallelism) / HOST_TO_GPU_BYTES_PER_S
    return node_start + fetch + copy + ENGINE_START_S


def derive(spec: ModelSpec, group: GroupPlan) -> AutoscalingChoice:
    """The knobs for one group of the plan; those its profile sets are kept as they are."""
    role, asked = group.role, group.replica_group.autoscaling
    est = group.estimates
    ttft_target_s = spec.latency.ttft_ms / 1e3
    rank_requests_per_s = est.requests_per_s / group.parallelism.data
    waiting = math.floor(max(0.0, ttft_target_s - est.ttft_s) * rank_requests_per_s)
    if role == "prefill":
        # A prefill replica has no inter-token latency to keep: its limit is the first token.
        sustained = max(1, math.floor(ttft_target_s / est.prefill_s))
        ceiling = sustained
    else:
        sustained = max(1, est.decode_batch)
        ceiling = sustained + max(1, waiting)
    target: float = sustained
    if asked.target_ongoing_requests is not None:
        target = asked.target_ongoing_requests
        ceiling = max(ceiling, math.ceil(target))
    if asked.max_ongoing_requests is not None:
        ceiling = asked.max_ongoing_requests
        target = min(target, ceiling)
    load_s = replica_load_s(spec, group)
    low, high = UPSCALE_DELAY_BOUNDS_S
    upscale = min(high, max(low, round(UPSCALE_SHARE_OF_LOAD * load_s)))
    downscale = max(MIN_DOWNSCALE_DELAY_S, round(DOWNSCALE_LOADS * load_s))
    return AutoscalingChoice(
        target_ongoing_requests=target,
        max_ongoing_requests=ceiling,
        upscale_delay_s=upscale if asked.upscale_delay_s is None else asked.upscale_delay_s,
        downscale_delay_s=downscale if asked.downscale_delay_s is None else asked.downscale_delay_s,
        sustained_batch=sustained,
        queue_within_ttft=waiting,
        load_s=load_s,
    )


def autoscaling(spec: ModelSpec, model_plan: Plan, role: Role = "server") -> AutoscalingChoice:
    """The knobs for one role of a spec (server, or the prefill or decode side), from its plan."""
    return derive(spec, model_plan.group(role))


def knobs_table(specs: list[ModelSpec]) -> str:
    """A Markdown table of every replica group's knobs, as the README shows them."""
    rows = [
        "| model / role | batch within ITL | target | max ongoing | load (est.) | up delay "
        "| down delay |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for spec in specs:
        model_plan = plan(spec)
        for group in model_plan.groups:
            choice = autoscaling(spec, model_plan, group.role)
            batch = "—" if group.role == "prefill" else str(group.estimates.decode_batch)
            rows.append(
                f"| {spec.name} / {group.role} | {batch} "
                f"| {choice.target_ongoing_requests:g} | {choice.max_ongoing_requests} "
                f"| {choice.load_s:,.0f} s | {choice.upscale_delay_s:g} s "
                f"| {choice.downscale_delay_s:,.0f} s |"
            )
    return "\n".join(rows) + "\n"
