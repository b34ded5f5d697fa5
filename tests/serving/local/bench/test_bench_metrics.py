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
    assert snapshot is not None
    assert bench_metrics.finished(snapshot, MODEL) == 3
    assert answers == []


def test_scrapes_that_never_answer_end_at_the_deadline_with_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def scrape(urls: object) -> top.Snapshot:
        raise TimeoutError("timed out")

    monkeypatch.setattr(bench_metrics.top, "snapshot", scrape)
    monkeypatch.setattr(bench_metrics, "SETTLE_POLL_S", 0.0)
    monkeypatch.setattr(bench_metrics, "SETTLE_TIMEOUT_S", 0.05)
    assert bench_metrics.settled(["http://127.0.0.1:1/metrics"], MODEL, at_least=1) is None
