"""vLLM's engine metrics, exported by the simulated engine under vLLM's own names.

With `log_engine_metrics` on, Ray Serve LLM hands vLLM's `RayPrometheusStatLogger` to the
engine, which records `vllm:*` metrics through `ray.util.metrics`. The simulated engine replaces
vLLM, so it records the same metrics itself (names, labels and buckets from
`serving.observability.metrics`), from its simulated steps: the dashboard, the alerts and
`servestack top` read a local run exactly as they read the cluster.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from ray import serve
from ray.util import metrics as ray_metrics

from serving.observability.metrics import (
    ENGINE_METRICS,
    RAY_REPLICA_LABEL,
    VLLM_LABELS,
    EngineMetric,
)

# Not one of vLLM's metrics (vLLM 0.22 counts no adapter loads): the simulated engine's own count
# of the LoRA adapters it loaded into a worker, which the bench reads over each load.
ADAPTER_LOADS = EngineMetric(
    "servestack:simulated_adapter_loads", "counter",
    "LoRA adapters the simulated engine loaded from storage into its worker.",
)  # fmt: skip
# A simulated request always runs to max_tokens (vllm.v1.engine.FinishReason.LENGTH).
FINISHED_BY_LENGTH = "length"
# Ray 2.56 exports a gauge only if it was set since the last export (its OpenTelemetry recorder
# clears gauges once read), so the queue gauges are set again this often, as vLLM sets them on
# every engine step.
GAUGE_REFRESH_S = 1.0


def _replica_id() -> str:
    try:
        return str(serve.get_replica_context().replica_id.unique_id)
    except RuntimeError:  # outside a Serve replica (unit tests)
        return ""


def _make(metric: EngineMetric) -> Any:
    tag_keys = (*VLLM_LABELS, *metric.extra_labels, RAY_REPLICA_LABEL)
    if metric.kind == "gauge":
        return ray_metrics.Gauge(metric.ray_name, metric.help, tag_keys=tag_keys)
    if metric.kind == "counter":
        return ray_metrics.Counter(metric.ray_name, metric.help, tag_keys=tag_keys)
    return ray_metrics.Histogram(
        metric.ray_name, metric.help, boundaries=list(metric.buckets), tag_keys=tag_keys
    )


class EngineMetrics:
    """One replica's engine metrics. `queue` says how many sequences run and wait now; KV-cache
    usage counts the tokens requests in flight hold (prompt and output) against the replica's
    KV capacity, as vLLM counts the blocks its running requests hold."""

    def __init__(
        self, model_name: str, queue: Callable[[], tuple[int, int]], kv_capacity_tokens: int
    ) -> None:
        self._queue = queue
        self._kv_capacity_tokens = max(1, kv_capacity_tokens)
        self._kv_tokens = 0
        self._refresher: asyncio.Task[None] | None = None
        self._tags = {"model_name": model_name, "engine": "0", RAY_REPLICA_LABEL: _replica_id()}
        self._metrics = {name: _make(metric) for name, metric in ENGINE_METRICS.items()}
        self._metrics[ADAPTER_LOADS.vllm_name] = _make(ADAPTER_LOADS)

    def _counter(self, name: str, value: float, **extra: str) -> None:
        if value > 0:
            self._metrics[name].inc(value, tags=self._tags | extra)

    def _observe(self, name: str, value: float) -> None:
        self._metrics[name].observe(value, tags=self._tags)

    def refresh_queue(self) -> None:
        running, waiting = self._queue()
        usage = min(1.0, self._kv_tokens / self._kv_capacity_tokens)
        self._metrics["vllm:num_requests_running"].set(running, tags=self._tags)
        self._metrics["vllm:num_requests_waiting"].set(waiting, tags=self._tags)
        self._metrics["vllm:kv_cache_usage_perc"].set(usage, tags=self._tags)

    async def refresh_forever(self) -> None:
        while True:
            self.refresh_queue()
            await asyncio.sleep(GAUGE_REFRESH_S)

    def scheduled(self, waited_s: float) -> None:
        """A request left the waiting queue for a running batch after `waited_s`."""
        self._observe("vllm:request_queue_time_seconds", waited_s)

    def adapter_loaded(self, adapter: str) -> None:
        """The worker loaded an adapter (the step that needed it waited)."""
        self._counter(ADAPTER_LOADS.vllm_name, 1)

    def admitted(self, prompt_tokens: int, cached_tokens: int) -> None:
        self._counter("vllm:prefix_cache_queries", prompt_tokens)
        self._counter("vllm:prefix_cache_hits", cached_tokens)
        self._counter("vllm:prompt_tokens", prompt_tokens)

    async def timed(self, words: AsyncIterator[str], kv_tokens: int) -> AsyncIterator[str]:
        """Pass a request's words through, timing its first token, the gaps between tokens and
        the whole request, as vLLM's output processor does; `kv_tokens` is what it holds."""
        arrived = last = time.monotonic()
        produced = 0
        # Started here, on the loop that serves requests: the loop the engine's start() ran on
        # need not outlive it.
        if self._refresher is None or self._refresher.done():
            self._refresher = asyncio.get_running_loop().create_task(self.refresh_forever())
        self._kv_tokens += kv_tokens
        self.refresh_queue()
        try:
            async for word in words:
                now = time.monotonic()
                if produced == 0:
                    self._observe("vllm:time_to_first_token_seconds", now - arrived)
                else:
                    self._observe("vllm:inter_token_latency_seconds", now - last)
                last, produced = now, produced + 1
                yield word
            self._observe("vllm:e2e_request_latency_seconds", time.monotonic() - arrived)
            self._counter("vllm:request_success", 1, finished_reason=FINISHED_BY_LENGTH)
        finally:
            self._kv_tokens -= kv_tokens
            self._counter("vllm:generation_tokens", produced)
            self.refresh_queue()
