"""A configuration whose application did not start is started once more under the same number:
the bench's lines count runs, not attempts (CI saw "[2/2] fast-paths-on" after a retried start,
and the second configuration numbered 3 of 2)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from infra.cli.progress import BenchProgress
from serving.local.bench.runner import START_ATTEMPTS, VariantStartError, retried_start


def lines(console: Console) -> list[str]:
    assert isinstance(console.file, io.StringIO)
    return [line for line in console.file.getvalue().splitlines() if line]


def test_a_retried_start_keeps_its_number_and_the_next_run_takes_the_next() -> None:
    console = Console(file=io.StringIO(), width=200, force_terminal=False)
    view = BenchProgress(console, runs=2)
    attempts: list[int] = []

    def first() -> str:
        view.configuration("fast", "decode-heavy", 4, "a local Ray")
        attempts.append(view.index)
        if len(attempts) == 1:
            raise VariantStartError("its replicas did not come up")
        view.ready()
        return "measured"

    assert retried_start(first, view) == "measured"
    view.configuration("slow", "decode-heavy", 4, "a local Ray")
    assert attempts == [1, 1]
    shown = lines(console)
    assert shown == [
        "[1/2] fast · decode-heavy: starting a local Ray",
        "[1/2] fast · decode-heavy: did not start; starting it again",
        "[1/2] fast · decode-heavy: starting a local Ray",
        shown[3],
        "[2/2] slow · decode-heavy: starting a local Ray",
    ]
    assert shown[3].startswith("[1/2] fast · decode-heavy: ready in ")


def test_a_start_that_fails_every_attempt_fails_the_run() -> None:
    console = Console(file=io.StringIO(), width=200, force_terminal=False)
    view = BenchProgress(console, runs=1)

    def never() -> None:
        view.configuration("fast", "decode-heavy", 4, "a local Ray")
        raise VariantStartError("its replicas did not come up")

    with pytest.raises(VariantStartError):
        retried_start(never, view)
    retries = [line for line in lines(console) if "starting it again" in line]
    assert len(retries) == START_ATTEMPTS - 1
