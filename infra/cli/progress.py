"""Progress of the long local commands, drawn with rich on a terminal.

`servestack bench --local` starts one local Ray per configuration and workload (minutes each
with the real engine): a line says which configuration is starting, when its replicas are ready,
how many requests are done (with a rate and an ETA) and when it has stopped, under a live line
for the step in progress. `servestack serve --local` shows its replicas' states while they come
up. Both write to the console they are given (stderr, so that stdout keeps only results) and
show nothing under --json or when that console is not a terminal.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.status import Status
from rich.text import Text

from serving.local.runtime.progress import QUIET, RunProgress


class _Rate(ProgressColumn):
    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("" if speed is None else f"{speed:.1f} req/s")


class BenchProgress:
    """The bench's run, configuration by configuration (a `RunProgress`)."""

    def __init__(self, console: Console, runs: int) -> None:
        self.runs = runs
        self.index = 0
        self.label = ""
        self.requests = self.done = 0
        self.started = self.ready_at = self.stop_at = 0.0
        self.live = Progress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(bar_width=20),
            MofNCompleteColumn(), _Rate(), TimeRemainingColumn(), TimeElapsedColumn(),
            console=console, transient=True,
        )  # fmt: skip
        self.task: TaskID | None = None
        self.again = False  # the next `configuration` starts the current run once more

    def _line(self, text: str) -> None:
        self.live.console.print(f"{self.label}: {text}", highlight=False)

    def configuration(self, name: str, workload: str, requests: int, starting: str) -> None:
        if not self.again:
            self.index += 1
        self.again = False
        self.label = f"[{self.index}/{self.runs}] {name} · {workload}"
        self.started = time.monotonic()
        self.requests, self.done = requests, 0
        if self.task is not None:
            self.live.remove_task(self.task)
        # Its clock runs from the start of the configuration; the rate and the ETA come from the
        # requests done, so they start with the first.
        self.task = self.live.add_task(f"{self.label}: starting {starting}", total=requests)
        self._line(f"starting {starting}")

    def state(self, text: str) -> None:
        if self.task is not None:
            self.live.update(self.task, description=f"{self.label}: {text}")

    def retrying(self) -> None:
        self._line("did not start; starting it again")
        self.again = True

    def ready(self) -> None:
        self.ready_at = time.monotonic()
        self._line(f"ready in {self.ready_at - self.started:.0f} s; sending the requests")
        if self.task is not None:
            self.live.update(self.task, description=f"{self.label}: requests")

    def request_done(self) -> None:
        self.done += 1
        if self.task is not None:
            self.live.advance(self.task)

    def stopping(self) -> None:
        self.stop_at = time.monotonic()
        took = self.stop_at - self.ready_at
        rate = self.done / took if took > 0 else 0.0
        self._line(
            f"{self.done}/{self.requests} requests in {took:.1f} s ({rate:.1f} req/s); stopping"
        )
        if self.task is not None:
            self.live.update(self.task, description=f"{self.label}: stopping")

    def stopped(self) -> None:
        self._line(f"stopped in {time.monotonic() - self.stop_at:.0f} s")


@contextlib.contextmanager
def bench_progress(console: Console, runs: int, *, quiet: bool) -> Iterator[RunProgress]:
    """The bench's progress over `runs` starts of an application, shown while the block runs;
    nothing where it must stay quiet."""
    if quiet or not console.is_terminal:
        yield QUIET
        return
    view = BenchProgress(console, runs)
    with view.live:
        yield view


class ServeProgress:
    """`serve --local` while it starts: a spinner with the step and the replicas' states, then
    one line with the time it took; afterwards (stopping) each step on a line of its own."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.shown = console.is_terminal
        self.started = time.monotonic()
        self.status: Status | None = None
        if self.shown:
            self.status = Status("starting", console=console)
            self.status.start()

    def state(self, text: str) -> None:
        if self.status is not None:
            self.status.update(text)
        elif self.shown:
            self.console.print(text, style="dim", highlight=False)

    def ready(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None
            self.console.print(
                f"ready in {time.monotonic() - self.started:.0f} s", style="dim", highlight=False
            )

    def close(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None
