"""`servestack top`'s arithmetic: rates and latency percentiles between two scrapes, computed
as Prometheus computes them for the dashboard."""

from __future__ import annotations

import pytest

from serving.observability.metrics import engine
from serving.observability.top import Snapshot, figures, parse, quantile, queue_ms


def exposition(requests: int, tokens: int, ttft_under_100ms: int, ttft_total: int) -> str:
    ttft = engine("vllm:time_to_first_token_seconds")
    label = 'model_name="m",engine="0",ReplicaId="r1"'
    return "\n".join(
        [
            f"# TYPE {engine('vllm:request_success').removesuffix('_total')} counter",
            f'{engine("vllm:request_success")}{{{label},finished_reason="length"}} {requests}',
            f"# TYPE {engine('vllm:generation_tokens').removesuffix('_total')} counter",
            f"{engine('vllm:generation_tokens')}{{{label}}} {tokens}",
            f"# TYPE {ttft} histogram",
            f'{ttft}_bucket{{{label},le="0.1"}} {ttft_under_100ms}',
            f'{ttft}_bucket{{{label},le="1.0"}} {ttft_total}',
            f'{ttft}_bucket{{{label},le="+Inf"}} {ttft_total}',
            f"{ttft}_count{{{label}}} {ttft_total}",
            f"{ttft}_sum{{{label}}} 1.0",
            f"# TYPE {engine('vllm:num_requests_running')} gauge",
            f"{engine('vllm:num_requests_running')}{{{label}}} 5",
            "",
        ]
    )


def test_rates_come_from_the_difference_between_scrapes() -> None:
    before = Snapshot(10.0, parse(exposition(100, 1000, 50, 100)))
    after = Snapshot(12.0, parse(exposition(120, 1600, 60, 120)))
    (row,) = figures(before, after)
    assert row.model == "m"
    assert row.requests_per_s == 10.0
    assert row.output_tokens_per_s == 300.0
    assert row.running == 5
    # Of the 20 first tokens in the window, 10 came under 100 ms: the median sits on 100 ms.
    assert row.ttft_p50_s == 0.1


def test_quantile_interpolates_inside_a_bucket_as_prometheus_does() -> None:
    buckets = {0.1: 0.0, 0.2: 10.0, float("inf"): 10.0}
    assert quantile(0.5, buckets) == pytest.approx(0.15)
    assert quantile(0.99, {0.1: 0.0, float("inf"): 0.0}) is None


def test_a_gauge_read_by_another_scraper_keeps_its_last_value() -> None:
    """Ray clears a gauge once scraped: a scrape without it shows the previous one's."""
    before = Snapshot(10.0, parse(exposition(100, 1000, 50, 100)))
    without_gauge = "\n".join(
        line for line in exposition(120, 1600, 60, 120).splitlines() if "num_requests" not in line
    )
    (row,) = figures(before, Snapshot(12.0, parse(without_gauge + "\n")))
    assert row.running == 5


def test_a_queue_time_inside_vllms_first_bucket_shows_only_its_bound() -> None:
    assert queue_ms(0.297) == "<300"
    assert queue_ms(0.45) == "450.0"
    assert queue_ms(None) == "—"
