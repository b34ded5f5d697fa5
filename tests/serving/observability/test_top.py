"""`servestack top`'s arithmetic: rates and latency percentiles between two scrapes, computed
as Prometheus computes them for the dashboard."""

from __future__ import annotations

import pytest

from serving.observability.metrics import ROUTER_DECISIONS, engine
from serving.observability.top import (
    Snapshot,
    figures,
    parse,
    quantile,
    queue_ms,
    routing_cell,
    table,
)


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


def decisions(affinity: int, spill: int, no_prompt: int) -> str:
    counter = ROUTER_DECISIONS
    label = 'application="m",ReplicaId="router-1"'
    return "\n".join(
        [
            f"# TYPE {counter.removesuffix('_total')} counter",
            f'{counter}{{{label},decision="affinity"}} {affinity}',
            f'{counter}{{{label},decision="spill"}} {spill}',
            f'{counter}{{{label},decision="no_prompt"}} {no_prompt}',
            "",
        ]
    )


def test_the_routers_decisions_show_as_shares_of_the_windows_placements() -> None:
    """Counted since the router started; shown as what it decided between the two scrapes."""
    before = parse(exposition(100, 1000, 50, 100) + decisions(50, 10, 0))
    after = parse(exposition(120, 1600, 60, 120) + decisions(80, 15, 5))
    (row,) = figures(Snapshot(10.0, before), Snapshot(12.0, after))
    assert row.routing == {"affinity": 0.75, "spill": 0.125, "no_prompt": 0.125}
    assert routing_cell(row.routing) == "affinity 75% no_prompt 12% spill 12%"


def test_no_routing_is_shown_where_the_router_placed_nothing() -> None:
    same = parse(exposition(100, 1000, 50, 100) + decisions(50, 10, 0))
    (row,) = figures(Snapshot(10.0, same), Snapshot(12.0, same))
    assert row.routing is None and routing_cell(row.routing) == "—"


def test_the_routing_column_appears_only_where_a_router_counted() -> None:
    def headers(text: str) -> list[str]:
        (row,) = figures(Snapshot(10.0, parse(exposition(100, 1000, 50, 100))),
                         Snapshot(12.0, parse(text)))  # fmt: skip
        return [str(c.header) for c in table([row], "t").columns]

    plain = exposition(120, 1600, 60, 120)
    assert "routing" not in headers(plain)
    assert headers(plain + decisions(5, 0, 0))[-1] == "routing"
