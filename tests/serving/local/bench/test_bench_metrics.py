"""The bench's reading of the engine's metrics on a busy machine: a scrape that times out is
asked again until the settle deadline, not a crash of the whole bench."""

from __future__ import annotations

import pytest

from serving.local.bench import metrics as bench_metrics
from serving.observability import top
from serving.observability.metrics import engine

MODEL = "m"


def finished_snapshot(count: float) -> top.Snapshot:
    return top.Snapshot(0.0, {(engine("vllm:request_success"), (("model_name", MODEL),)): count})


def test_a_timed_out_scrape_is_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    answers: list[object] = [TimeoutError("timed out"), finished_snapshot(3)]

    def scrape(urls: object) -> top.Snapshot:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        assert isinstance(answer, top.Snapshot)
        return answer

    monkeypatch.setattr(bench_metrics.top, "snapshot", scrape)
    monkeypatch.setattr(bench_metrics, "SETTLE_POLL_S", 0.0)
    snapshot = bench_metrics.settled(["http://127.0.0.1:1/metrics"], MODEL, at_least=3)
    assert isinstance(snapshot, top.Snapshot)
    assert bench_metrics.finished(snapshot, MODEL) == 3
    assert answers == []


def test_scrapes_that_never_answer_end_at_the_deadline_saying_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def scrape(urls: object) -> top.Snapshot:
        raise TimeoutError("timed out")

    monkeypatch.setattr(bench_metrics.top, "snapshot", scrape)
    monkeypatch.setattr(bench_metrics, "SETTLE_POLL_S", 0.0)
    monkeypatch.setattr(bench_metrics, "SETTLE_TIMEOUT_S", 0.05)
    why = bench_metrics.settled(["http://127.0.0.1:1/metrics"], MODEL, at_least=1)
    assert why == "the last scrape of Ray's metrics connected but sent no answer in time, 0 s on"


def test_counters_short_of_the_answered_requests_say_how_short(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A scrape that answers but counts fewer finished requests than the load answered is not
    taken: its difference would be another load's figures. The figures say so, and by how many."""
    monkeypatch.setattr(bench_metrics.top, "snapshot", lambda urls: finished_snapshot(7))
    monkeypatch.setattr(bench_metrics, "SETTLE_POLL_S", 0.0)
    monkeypatch.setattr(bench_metrics, "SETTLE_TIMEOUT_S", 0.05)
    why = bench_metrics.figures_after(["u"], MODEL, finished_snapshot(4), answered=5)
    assert why == "after the load, the engine's counter showed 7 of 9 finished requests, 0 s on"
    assert bench_metrics.figures_after(["u"], MODEL, "x", answered=5) == "before the load, x"
