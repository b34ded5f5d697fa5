"""`servestack top`: the dashboard's signals per model, live in a terminal.

It scrapes Prometheus text from metrics endpoints (a local run's, found through
`serving.local.runtime.observed`, or any URL: a port-forwarded Ray head's :8080/metrics), keeps the
previous scrape, and turns the difference into the figures the dashboard draws: requests/s,
output tokens/s, TTFT and inter-token p50/p99, queue time p99, running and waiting requests,
KV-cache usage, prefix-cache hit rate, and the share of each decision servestack's router made
(`metrics.ROUTER_DECISIONS`: affinity, spill, new_prompt, no_prompt). Metric names come from
`serving.observability.metrics`, as the dashboard's do. `serving.local.bench.runner` reads a
run's figures with the same arithmetic.
"""

from __future__ import annotations

import contextlib
import http.client
import math
import time
import urllib.error
import urllib.request
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from prometheus_client.parser import text_string_to_metric_families
from rich.table import Table
from rich.text import Text

from serving.observability.metrics import REQUEST_LATENCY_BUCKETS_S, ROUTER_DECISIONS, engine

# (series name, sorted labels) -> value
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
SCRAPE_TIMEOUT_S = 5.0
# What a scrape of an endpoint that is down, stuck or not an exporter raises: no connection, no
# answer in time (TimeoutError), a reply cut short or not HTTP, an HTTP error, text that is
# not Prometheus' (ValueError, UnicodeDecodeError).
SCRAPE_ERRORS = (OSError, http.client.HTTPException, ValueError)

Reading = TypeVar("Reading")


def scrape(url: str, timeout_s: float = SCRAPE_TIMEOUT_S) -> Samples:
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        text = response.read().decode()
    return parse(text)


def patiently(
    read: Callable[[], Reading],
    done: Callable[[Reading], bool],
    timeout_s: float,
    poll_s: float = 1.0,
) -> Reading | None:
    """`read()` (a scrape, or figures from one) again every `poll_s` until `done` holds of what
    it returned, or `timeout_s` passes: the reading `done` accepted, else the last one read (None
    if every read failed). Ray exports what its processes pushed a second or so before, and a
    loaded machine's metrics agent can be slow to answer: a read that fails (SCRAPE_ERRORS)
    counts as no reading, not as the end."""
    deadline = time.monotonic() + timeout_s
    last: Reading | None = None
    while True:
        try:
            last = read()
        except SCRAPE_ERRORS:
            pass
        else:
            if done(last):
                return last
        if time.monotonic() >= deadline:
            return last
        time.sleep(poll_s)


def unreachable(exc: BaseException) -> str:
    """Why a scrape failed, in a few words, from what `scrape` raised."""
    reason = (
        exc.reason
        if isinstance(exc, urllib.error.URLError) and not isinstance(exc, urllib.error.HTTPError)
        else exc
    )
    if isinstance(reason, TimeoutError):
        return "connected but sent no answer in time"
    if isinstance(reason, ConnectionRefusedError):
        return "refused the connection (nothing listens there)"
    if isinstance(reason, urllib.error.HTTPError):
        return f"answered HTTP {reason.code}"
    if isinstance(reason, (http.client.HTTPException, ConnectionError)):
        return f"did not answer HTTP ({type(reason).__name__})"
    if isinstance(reason, ValueError):
        return "answered something that is not Prometheus text"
    return f"failed: {reason}"


def parse(text: str) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


@dataclass(frozen=True)
class Snapshot:
    at_s: float
    samples: Samples


def _by_model(samples: Samples, name: str) -> dict[str, float]:
    """A series summed per model_name (over replicas and engines)."""
    totals: dict[str, float] = defaultdict(float)
    for (series, labels), value in samples.items():
        if series == name:
            totals[dict(labels).get("model_name", "")] += value
    return totals


def _max_by_model(samples: Samples, name: str) -> dict[str, float]:
    found: dict[str, float] = {}
    for (series, labels), value in samples.items():
        if series == name:
            model = dict(labels).get("model_name", "")
            found[model] = max(found.get(model, 0.0), value)
    return found


def _decisions(samples: Samples) -> dict[str, dict[str, float]]:
    """servestack's router decisions counted so far: application -> decision -> count. (The
    router labels its counter by the model's Serve application, named as the model.)"""
    found: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for (series, labels), value in samples.items():
        if series == ROUTER_DECISIONS:
            label = dict(labels)
            found[label.get("application", "")][label.get("decision", "")] += value
    return found


def _shares(before: Samples, after: Samples) -> dict[str, dict[str, float]]:
    """Each decision's share of the router's placements between the two scrapes, per model."""
    old = _decisions(before)
    shares: dict[str, dict[str, float]] = {}
    for model, counts in _decisions(after).items():
        made = {d: max(0.0, n - old.get(model, {}).get(d, 0.0)) for d, n in counts.items()}
        total = sum(made.values())
        if total:
            shares[model] = {d: n / total for d, n in made.items() if n}
    return shares


def _buckets(samples: Samples, histogram: str) -> dict[str, dict[float, float]]:
    """Cumulative bucket counts per model: model -> upper bound -> count."""
    found: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    for (series, labels), value in samples.items():
        if series == f"{histogram}_bucket":
            label = dict(labels)
            found[label.get("model_name", "")][float(label["le"])] += value
    return found


def quantile(q: float, buckets: Mapping[float, float]) -> float | None:
    """Prometheus' histogram_quantile over cumulative buckets (linear inside a bucket)."""
    bounds = sorted(buckets)
    if not bounds or buckets[bounds[-1]] <= 0:
        return None
    rank, lower, below = q * buckets[bounds[-1]], 0.0, 0.0
    for bound in bounds:
        count = buckets[bound]
        if count >= rank:
            if math.isinf(bound):
                return lower
            share = (rank - below) / (count - below) if count > below else 0.0
            return lower + (bound - lower) * share
        lower, below = bound, count
    return None


@dataclass(frozen=True)
class ModelFigures:
    model: str
    requests_per_s: float
    output_tokens_per_s: float
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    itl_p50_s: float | None
    itl_p99_s: float | None
    queue_p99_s: float | None  # time waited for a batch; vLLM's buckets start at 0.3 s
    running: float
    waiting: float
    kv_cache_usage: float
    prefix_hit_rate: float | None
    # servestack's router: each decision's share of the placements in the window.
    routing: dict[str, float] | None = None


def figures(before: Snapshot, after: Snapshot) -> list[ModelFigures]:
    """Per model, what happened between two scrapes (rates) and where things stand (gauges)."""
    seconds = max(after.at_s - before.at_s, 1e-9)

    def rate(name: str) -> dict[str, float]:
        old, new = _by_model(before.samples, name), _by_model(after.samples, name)
        return {m: max(0.0, v - old.get(m, 0.0)) / seconds for m, v in new.items()}

    def window(histogram: str) -> dict[str, dict[float, float]]:
        old, new = _buckets(before.samples, histogram), _buckets(after.samples, histogram)
        return {
            m: {le: count - old.get(m, {}).get(le, 0.0) for le, count in bounds.items()}
            for m, bounds in new.items()
        }

    done = rate(engine("vllm:request_success"))
    tokens = rate(engine("vllm:generation_tokens"))
    hits, asked = rate(engine("vllm:prefix_cache_hits")), rate(engine("vllm:prefix_cache_queries"))
    queue = window(engine("vllm:request_queue_time_seconds"))
    ttft = window(engine("vllm:time_to_first_token_seconds"))
    itl = window(engine("vllm:inter_token_latency_seconds"))

    def gauge(name: str, pick: Callable[[Samples, str], dict[str, float]]) -> dict[str, float]:
        # Ray's exporter shows a gauge only in the first scrape after a process pushed it, so
        # one absent from this scrape (read by another scraper first) keeps the last value.
        return pick(before.samples, name) | pick(after.samples, name)

    running = gauge(engine("vllm:num_requests_running"), _by_model)
    waiting = gauge(engine("vllm:num_requests_waiting"), _by_model)
    kv = gauge(engine("vllm:kv_cache_usage_perc"), _max_by_model)
    routing = _shares(before.samples, after.samples)
    models = sorted(set(running) | set(done) | set(ttft))
    return [
        ModelFigures(
            model=model,
            requests_per_s=done.get(model, 0.0),
            output_tokens_per_s=tokens.get(model, 0.0),
            ttft_p50_s=quantile(0.5, ttft.get(model, {})),
            ttft_p99_s=quantile(0.99, ttft.get(model, {})),
            itl_p50_s=quantile(0.5, itl.get(model, {})),
            itl_p99_s=quantile(0.99, itl.get(model, {})),
            queue_p99_s=quantile(0.99, queue.get(model, {})),
            running=running.get(model, 0.0),
            waiting=waiting.get(model, 0.0),
            kv_cache_usage=kv.get(model, 0.0),
            prefix_hit_rate=hits.get(model, 0.0) / asked[model] if asked.get(model) else None,
            routing=routing.get(model),
        )
        for model in models
        if model
    ]


def _ms(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds * 1e3:,.1f}"


def queue_ms(seconds: float | None) -> str:
    """A queue-time quantile in milliseconds; inside vLLM's first bucket only its bound is
    known (Prometheus would interpolate a figure the data cannot tell)."""
    if seconds is not None and seconds <= REQUEST_LATENCY_BUCKETS_S[0]:
        return f"<{REQUEST_LATENCY_BUCKETS_S[0] * 1e3:g}"
    return _ms(seconds)


def routing_cell(shares: dict[str, float] | None) -> str:
    """The router's decisions, the most frequent first: 'affinity 80% spill 20%'."""
    if not shares:
        return "—"
    ranked = sorted(shares.items(), key=lambda item: (-item[1], item[0]))
    return " ".join(f"{decision} {share:.0%}" for decision, share in ranked)


def table(rows: Iterable[ModelFigures], title: str) -> Table:
    """The figures as one rich table, a row per model; latencies in milliseconds."""
    rows = list(rows)
    view = Table(title=title, title_justify="left")
    view.add_column("model", no_wrap=True, min_width=max([5, *(len(r.model) for r in rows)]))
    for header in (
        "req/s", "out tok/s", "TTFT p50 ms", "TTFT p99 ms", "ITL p50 ms", "ITL p99 ms",
        "queue p99 ms", "run", "wait", "KV cache", "prefix hit",
    ):  # fmt: skip
        view.add_column(header, justify="right")
    # Only where a servestack router placed requests: other routers count nothing.
    routed = any(row.routing is not None for row in rows)
    if routed:
        view.add_column("routing")
    for row in rows:
        cells = [
            row.model, f"{row.requests_per_s:,.2f}", f"{row.output_tokens_per_s:,.0f}",
            _ms(row.ttft_p50_s), _ms(row.ttft_p99_s), _ms(row.itl_p50_s), _ms(row.itl_p99_s),
            queue_ms(row.queue_p99_s),
            f"{row.running:g}", f"{row.waiting:g}", f"{row.kv_cache_usage:.0%}",
            "—" if row.prefix_hit_rate is None else f"{row.prefix_hit_rate:.2f}",
        ]  # fmt: skip
        view.add_row(*cells, *([routing_cell(row.routing)] if routed else []))
    return view


def _merged(samples: Iterable[Samples]) -> Samples:
    """Several endpoints' samples as one (each local run is its own Ray)."""
    merged: Samples = {}
    for one in samples:
        for key, value in one.items():
            merged[key] = merged.get(key, 0.0) + value
    return merged


def snapshot(urls: Iterable[str]) -> Snapshot:
    """One scrape of every endpoint, merged; raises what `scrape` raises if one fails."""
    return Snapshot(time.monotonic(), _merged(scrape(url) for url in urls))


@dataclass(frozen=True)
class Round:
    """One scrape of every endpoint at once: the samples of those that answered, and why each
    of the others did not."""

    at_s: float
    answered: dict[str, Samples]
    unreachable: dict[str, str]


def scrape_round(urls: Iterable[str], timeout_s: float = SCRAPE_TIMEOUT_S) -> Round:
    """Every endpoint scraped at the same moment, so one that is slow or silent delays no
    other's sample and each round's samples share one time."""
    urls = list(dict.fromkeys(urls))
    at_s = time.monotonic()
    answered: dict[str, Samples] = {}
    unreachable_: dict[str, str] = {}
    if not urls:
        return Round(at_s, answered, unreachable_)
    with ThreadPoolExecutor(max_workers=len(urls)) as pool:
        futures = {url: pool.submit(scrape, url, timeout_s) for url in urls}
        for url, future in futures.items():
            try:
                answered[url] = future.result()
            except SCRAPE_ERRORS as exc:
                unreachable_[url] = unreachable(exc)
    return Round(at_s, answered, unreachable_)


def between(before: Round, after: Round) -> list[ModelFigures]:
    """The figures over the endpoints that answered both rounds: one missing from either has no
    window to count (its counters are not mixed with another endpoint's)."""
    both = before.answered.keys() & after.answered.keys()
    return figures(
        Snapshot(before.at_s, _merged(before.answered[url] for url in sorted(both))),
        Snapshot(after.at_s, _merged(after.answered[url] for url in sorted(both))),
    )


@dataclass(frozen=True)
class Watched:
    """What a watch showed, and the endpoints it was still asked to watch at the end that
    answered none of its scrapes, each with why the last one failed."""

    tables: int
    never_answered: dict[str, str]


def watch(
    endpoints: Callable[[], list[str]],
    show: Callable[[Table], None],
    *,
    interval_s: float,
    seconds: float | None = None,
    title: str = "servestack top",
    timeout_s: float = SCRAPE_TIMEOUT_S,
) -> Watched:
    """Scrape `endpoints()` every `interval_s`, `show` a table of the figures between the last
    two scrapes, until `seconds` have passed, or forever, or Ctrl-C. An endpoint that does not
    answer within `timeout_s` is named under that interval's table and asked again the next."""
    started = time.monotonic()
    answered_once: set[str] = set()
    shown = 0
    last = Round(started, {}, {})
    with contextlib.suppress(KeyboardInterrupt):
        before = last = scrape_round(endpoints(), timeout_s)
        answered_once |= set(last.answered)
        while seconds is None or time.monotonic() - started < seconds:
            time.sleep(interval_s)
            last = scrape_round(endpoints(), timeout_s)
            answered_once |= set(last.answered)
            caption = "\n".join(
                f"unreachable this interval: {url} {why}; asking again in {interval_s:g} s"
                for url, why in last.unreachable.items()
            )
            view = table(between(before, last), f"{title} · every {interval_s:g} s")
            view.caption, view.caption_justify = Text(caption) if caption else None, "left"
            show(view)
            shown, before = shown + 1, last
    never = {url: why for url, why in last.unreachable.items() if url not in answered_once}
    return Watched(shown, never)
