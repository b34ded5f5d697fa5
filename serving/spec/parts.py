"""The parts of a model spec, each a section of the profile with its own rules: parallelism,
request router, autoscaling bounds, latency targets, workload and fast paths. `serving.spec.profile`
assembles them into `ModelSpec` (with prefill/decode disaggregation, whose sides name the
model's fields) and checks what must hold between them."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, model_validator

from serving.catalog.fast_paths import fast_path
from serving.errors import FixableValueError
from serving.frozen import StrictFrozen

RouterKind = Literal[
    "prefix_affinity",
    "servestack_prefix_affinity",
    "servestack_precise_prefix",
    "power_of_two",
    "round_robin",
]


class Parallelism(StrictFrozen):
    """How one replica is split over GPUs."""

    tensor: int = Field(default=1, ge=1, le=64, description="Tensor-parallel size.")
    pipeline: int = Field(default=1, ge=1, le=64, description="Pipeline-parallel stages.")
    data: int = Field(
        default=1,
        ge=1,
        le=256,
        description="Data-parallel ranks inside one DP+EP group (mixture-of-experts only).",
    )
    expert: bool = Field(default=False, description="Shard experts over DP x TP ranks (MoE only).")

    @property
    def model_parallel_size(self) -> int:
        """GPUs holding one copy of the non-expert weights."""
        return self.tensor * self.pipeline

    @property
    def gpus_per_replica(self) -> int:
        return self.tensor * self.pipeline * self.data

    @property
    def expert_parallel_size(self) -> int:
        """vLLM shards experts over the whole DP x TP group when expert parallelism is on."""
        return self.data * self.tensor if self.expert else 1

    @property
    def label(self) -> str:
        """Short form for tables: 'TP=2 PP=1', 'TP=1 PP=1 DP=8+EP'."""
        text = f"TP={self.tensor} PP={self.pipeline}"
        if self.data > 1 or self.expert:
            text += f" DP={self.data}" + ("+EP" if self.expert else "")
        return text


class Router(StrictFrozen):
    """How Ray Serve picks a replica for a request."""

    kind: RouterKind = Field(
        default="servestack_prefix_affinity",
        description="servestack_prefix_affinity routes shared prefixes to the replica caching "
        "them, load-bounded (serving.router.prefix_affinity); prefix_affinity is Ray's "
        "PrefixCacheAffinityRouter, which under HAProxy + direct streaming sends every request "
        "to one replica (Ray 2.56.1); servestack_precise_prefix routes on what each replica's "
        "engine reports it caches (serving.router.precise).",
    )
    imbalanced_threshold: float | None = Field(
        default=None, gt=0, description="Queue-length gap beyond which load wins over affinity."
    )
    match_rate_threshold: float | None = Field(
        default=None, ge=0, le=1, description="Smallest prefix match rate that counts as a hit."
    )
    do_eviction: bool | None = Field(default=None, description="Evict the router's prefix tree.")
    eviction_threshold_chars: int | None = Field(
        default=None, gt=0, description="Prefix-tree size, in characters, that starts eviction."
    )
    eviction_target_chars: int | None = Field(
        default=None, gt=0, description="Prefix-tree size, in characters, eviction shrinks to."
    )
    eviction_interval_secs: int | None = Field(
        default=None, gt=0, description="Seconds between the router's eviction passes."
    )
    # servestack_prefix_affinity (serving/router/prefix_affinity.py); unset ones keep the router's
    # defaults.
    chunk_chars: int | None = Field(
        default=None, ge=16, description="Prompt characters per hashed prefix chunk."
    )
    max_chunks: int | None = Field(default=None, ge=1, description="Chunks of a prompt matched.")
    window_s: float | None = Field(
        default=None, gt=0, description="Seconds of recent routing that count as a replica's load."
    )
    imbalance_ratio: float | None = Field(
        default=None,
        ge=1,
        description="Load above this times the least-loaded replica's is too much.",
    )
    slack_requests: int | None = Field(
        default=None, ge=0, description="Requests of headroom before the imbalance ratio applies."
    )
    max_entries: int | None = Field(default=None, ge=1, description="Prefix chunks remembered.")

    @model_validator(mode="before")
    @classmethod
    def _from_kind(cls, value: Any) -> Any:
        return {"kind": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _kwargs_match_the_kind(self) -> Router:
        allowed = set(ROUTER_KWARGS.get(self.kind, ()))
        for kind, names in ROUTER_KWARGS.items():
            given = sorted(n for n in names if getattr(self, n) is not None and n not in allowed)
            if given and self.kind != kind:
                raise FixableValueError(
                    f"{', '.join(given)} tune the {kind} router, not {self.kind}",
                    f"remove them, or set kind: {kind}",
                )
        return self

    def affinity_kwargs(self) -> dict[str, float | int | bool]:
        """The arguments of the chosen router the profile sets (unset ones keep its defaults)."""
        return {k: v for k, v in self.model_dump(exclude={"kind"}).items() if v is not None}


# Each router's tuning, by kind: PrefixCacheAffinityRouter's (Ray) and servestack's own.
ROUTER_KWARGS: dict[str, tuple[str, ...]] = {
    "prefix_affinity": (
        "imbalanced_threshold", "match_rate_threshold", "do_eviction",
        "eviction_threshold_chars", "eviction_target_chars", "eviction_interval_secs",
    ),
    "servestack_prefix_affinity": (
        "chunk_chars", "max_chunks", "window_s", "imbalance_ratio", "slack_requests",
        "max_entries",
    ),
    # The chunking is the replicas' too (their reports name chunks), so it is not tunable here.
    "servestack_precise_prefix": (
        "window_s", "imbalance_ratio", "slack_requests", "max_entries",
    ),
}  # fmt: skip

# The routers that read the adapter a request names (its body's `model`, `<base>:<adapter>`)
# and prefer a replica that holds it: servestack's own (serving/router/). Under direct streaming
# Ray 2.56.1 hands a router the request body and nothing else (no multiplexed model id), so
# Ray's PrefixCacheAffinityRouter, power of two and round robin cannot see the adapter there.
ADAPTER_AWARE_ROUTERS: frozenset[RouterKind] = frozenset(
    {"servestack_prefix_affinity", "servestack_precise_prefix"}
)


class Autoscaling(StrictFrozen):
    """Replica bounds, and Ray Serve's autoscaling knobs. The knobs left unset are derived from
    the plan (`serving.compile.autoscaling`): set one only to override what the plan says."""

    min_replicas: int = Field(
        default=1, ge=0, le=1000, description="Fewest replicas; 0 lets an idle model scale away."
    )
    max_replicas: int = Field(
        default=1, ge=1, le=1000, description="Most replicas; the GPU pools are sized for it."
    )
    target_ongoing_requests: float | None = Field(
        default=None,
        gt=0,
        description="Requests in flight per replica that autoscaling aims at; unset, the decode "
        "batch the plan says a replica sustains within latency.itl_ms.",
    )
    max_ongoing_requests: int | None = Field(
        default=None,
        ge=1,
        description="Requests one replica accepts before Serve queues them at the router; unset, "
        "that batch plus the requests that can wait and still see a first token within "
        "latency.ttft_ms.",
    )
    upscale_delay_s: float | None = Field(
        default=None,
        ge=0,
        description="How long load must stay above target before a replica is added; unset, "
        "derived from how long a replica takes to load its weights.",
    )
    downscale_delay_s: float | None = Field(
        default=None,
        ge=0,
        description="How long load must stay below target before a replica is removed; unset, "
        "a few times the replica's load time, so a lull shorter than a reload keeps it.",
    )

    @model_validator(mode="after")
    def _ordered(self) -> Autoscaling:
        if self.min_replicas > self.max_replicas:
            raise FixableValueError(
                f"min_replicas ({self.min_replicas}) is above max_replicas ({self.max_replicas})",
                f"raise max_replicas to at least {self.min_replicas}, or lower min_replicas",
            )
        target, ceiling = self.target_ongoing_requests, self.max_ongoing_requests
        if target is not None and ceiling is not None and target > ceiling:
            raise FixableValueError(
                f"target_ongoing_requests ({target:g}) is above max_ongoing_requests ({ceiling}): "
                "a replica could never reach the load autoscaling waits for",
                f"raise max_ongoing_requests to at least {math.ceil(target)}, or unset either "
                "to derive it from the plan",
                field="target_ongoing_requests",
            )
        return self


# The latency a model is served within unless its profile says otherwise: an interactive chat
# stream (50 ms between tokens reads faster than people do) and a first token within 2 s.
DEFAULT_ITL_TARGET_MS = 50.0
DEFAULT_TTFT_TARGET_MS = 2000.0


class LatencyTargets(StrictFrozen):
    """What a model promises its users, at p99. The plan takes the largest decode batch within
    `itl_ms`, autoscaling keeps the queue short enough for `ttft_ms`, and the TTFT alert fires
    when the served p99 stays above it."""

    ttft_ms: float = Field(
        default=DEFAULT_TTFT_TARGET_MS, gt=0, description="Time to first token, milliseconds."
    )
    itl_ms: float = Field(
        default=DEFAULT_ITL_TARGET_MS, gt=0, description="Inter-token latency, milliseconds."
    )


class Workload(StrictFrozen):
    """The typical request, for estimates only."""

    input_tokens: int = Field(default=1024, ge=1, description="Prompt tokens per request.")
    output_tokens: int = Field(default=256, ge=1, description="Generated tokens per request.")
    # A hit rate, not a count of shared prefix tokens: it is what vLLM measures (prefix-cache hits
    # over queries, in prompt tokens), so the alert holds the plan to the engine's own figure;
    # how many shared tokens stay cached depends on routing and eviction, which is what the
    # alert is there to catch failing.
    prefix_cache_hit_rate: float | None = Field(
        default=None, ge=0, lt=1,
        description="Share of prompt tokens the plan expects vLLM's prefix cache to serve "
        "(prefix_cache_hits / prefix_cache_queries): the estimates compute only the rest of "
        "each prompt, and an alert fires when the measured rate stays below it. Unset: the "
        "plan assumes none, and no alert.",
    )  # fmt: skip
    max_output_tokens: int | None = Field(
        default=None, ge=1,
        description="The generation cap each request sets (max_tokens), at which vLLM stops "
        "it: the estimates spread outputs around output_tokens as chat completions spread, cut "
        "at the cap, so the longest end together there. Unset: no cap short of max_model_len.",
    )  # fmt: skip

    @property
    def decode_context_tokens(self) -> int:
        """The context a sequence holds on average while it decodes: its prompt and half of its
        output, the length its decode steps read KV cache for."""
        return self.input_tokens + self.output_tokens // 2

    @model_validator(mode="after")
    def _cap_holds_the_mean(self) -> Workload:
        cap = self.max_output_tokens
        if cap is not None and cap < self.output_tokens:
            raise FixableValueError(
                f"max_output_tokens ({cap}) is below output_tokens ({self.output_tokens}): no "
                "request could generate the mean",
                f"raise max_output_tokens to at least {self.output_tokens}, or unset it",
                field="max_output_tokens",
            )
        return self


class FastPaths(StrictFrozen):
    """Ray 2.56 fast paths; all on by default, switchable for side-by-side comparisons."""

    haproxy: bool = Field(default=True, description=fast_path("haproxy").description)
    direct_streaming: bool = Field(
        default=True, description=fast_path("direct_streaming").description
    )
    throughput_optimized: bool = Field(
        default=True, description=fast_path("throughput_optimized").description
    )
    ray_v2_executor: bool = Field(
        default=True, description=fast_path("ray_v2_executor").description
    )

    @model_validator(mode="after")
    def _streaming_needs_haproxy(self) -> FastPaths:
        if self.direct_streaming and not self.haproxy:
            raise FixableValueError(
                "direct streaming routes through Ray Serve's HAProxy ingress (Ray 2.56 refuses "
                "an ingress request router without it)",
                "set haproxy: true, or direct_streaming: false",
                field="direct_streaming",
            )
        return self
