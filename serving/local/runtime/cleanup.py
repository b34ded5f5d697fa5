"""What a local run leaves behind, found while it runs and removed after its Ray has stopped.

Ray's shutdown stops its own processes, but vLLM's engine processes are children of a replica,
not Ray actors: a replica that is killed (or restarted by Serve) leaves them orphaned, still
holding their `/dev/shm` segments (vLLM's message queues, multiprocessing's semaphores), and an
HAProxy whose proxy actor died lives on the same way. So the run keeps a census of the processes
it started and of the `/dev/shm` files they hold, taken while it runs (every few seconds: a
process that dies mid-run takes the knowledge of its segments with it) and again around Ray's
shutdown; afterwards whichever of those is still there is ended (by pid, checked against its
start time so a reused pid is never touched) or unlinked. Linux only, read from /proc.

What the run started is told two ways, both blind to other runs on the machine:
- it carries the run's mark in its environment (`RUN_VARIABLE`, inherited by every process the
  run starts and kept when one is orphaned and adopted by init; a run hosted by a process that
  another run started keeps that run's mark, so what it orphans is found by the enclosing run);
- it descends from the process hosting the run and was not there when the run began: a process
  that hosts one run after another (pytest, a command comparing configurations) may still have
  children of its own (an earlier run's Ray winding down, a Redis server its caller started),
  and those, with whatever they start later, are not the run's to end, marked or not.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROC = Path("/proc")
SHM = Path("/dev/shm")
RUN_VARIABLE = "SERVESTACK_LOCAL_RUN"
# How often a running run's census is taken.
WATCH_INTERVAL_S = 5.0
# serve.shutdown waits up to 30 s for the controller, then Ray stops its processes; on two
# busy cores that can take minutes.
STOP_TIMEOUT_S = 240.0


@dataclass(frozen=True)
class Census:
    """Processes (pid -> start time in clock ticks) and /dev/shm files of a run."""

    processes: dict[int, int] = field(default_factory=dict)
    shm: frozenset[Path] = frozenset()


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time) of a process, or None if it is gone."""
    try:
        raw = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    fields = raw[raw.rindex(")") + 2 :].split()
    return int(fields[1]), int(fields[19])


def descendants(root: int, outside: Mapping[int, int] | None = None) -> dict[int, int]:
    """Every live process below `root`, pid -> start time, leaving out the processes of
    `outside` (same pid, same start time) and everything below them."""
    outside = outside or {}
    parents: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        stat = _stat(int(entry.name))
        if stat is not None:
            parents.setdefault(stat[0], []).append(int(entry.name))
            starts[int(entry.name)] = stat[1]
    found: dict[int, int] = {}
    stack = [root]
    while stack:
        for child in parents.get(stack.pop(), []):
            if child not in found and child in starts and outside.get(child) != starts[child]:
                found[child] = starts[child]
                stack.append(child)
    return found


def _shm_held(pid: int) -> set[Path]:
    held: set[Path] = set()
    with contextlib.suppress(OSError):
        for line in (PROC / str(pid) / "maps").read_text().splitlines():
            path = line.split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
            if path.startswith(f"{SHM}/"):
                held.add(Path(path.removesuffix(" (deleted)")))
    with contextlib.suppress(OSError):
        for fd in (PROC / str(pid) / "fd").iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith(f"{SHM}/"):
                    held.add(Path(target.removesuffix(" (deleted)")))
    return held


def census(root: int | None = None, outside: Mapping[int, int] | None = None) -> Census:
    """The processes below `root` (this process by default) but not in `outside`'s subtrees, and
    the /dev/shm files they hold, now."""
    processes = descendants(os.getpid() if root is None else root, outside)
    shm: set[Path] = set()
    for pid in processes:
        shm |= _shm_held(pid)
    return Census(processes, frozenset(shm))


def marked(mark: str) -> dict[int, int]:
    """Every live process whose environment carries `RUN_VARIABLE=mark`, pid -> start time."""
    wanted = f"{RUN_VARIABLE}={mark}".encode()
    found: dict[int, int] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone, or another user's
            continue
        if wanted in environ.split(b"\0"):
            stat = _stat(int(entry.name))
            if stat is not None:
                found[int(entry.name)] = stat[1]
    return found


class RunCensus:
    """The census of one run hosted by this process, from when it is made: the run's processes
    are those started with `environment` in their environment, or below this process since."""

    def __init__(self) -> None:
        self.root = os.getpid()
        # A run hosted by a process another run started (the benchmark's or the fault runner's
        # runtime process) is part of that run and keeps its mark: what it leaves behind, even
        # if it is killed before its own clean-up, the enclosing run finds by the mark.
        self.mark = os.environ.get(RUN_VARIABLE) or f"{self.root}-{uuid.uuid4().hex}"
        self.environment = {RUN_VARIABLE: self.mark}
        self.before = descendants(self.root)
        self.counted = Census()
        self._lock = threading.Lock()

    def take(self) -> Census:
        """Count what runs now; returns everything counted so far."""
        # A process that was there before the run is not the run's, even with its (inherited)
        # mark: a Redis server the fault runner's session started before its local Ray.
        processes = descendants(self.root, self.before) | {
            pid: start for pid, start in marked(self.mark).items() if self.before.get(pid) != start
        }
        processes.pop(self.root, None)
        now = Census(processes, frozenset().union(*(_shm_held(pid) for pid in processes)))
        with self._lock:
            self.counted = merge(self.counted, now)
            return self.counted

    @contextlib.contextmanager
    def watching(self, interval_s: float = WATCH_INTERVAL_S) -> Iterator[None]:
        """Take the census every `interval_s` while the block runs."""
        done = threading.Event()

        def watch() -> None:
            while not done.wait(interval_s):
                self.take()

        watcher = threading.Thread(target=watch, name="run-census", daemon=True)
        watcher.start()
        try:
            yield
        finally:
            done.set()
            watcher.join()


def merge(*censuses: Census) -> Census:
    processes: dict[int, int] = {}
    shm: set[Path] = set()
    for one in censuses:
        processes |= one.processes
        shm |= one.shm
    return Census(processes, frozenset(shm))


def alive(counted: Census) -> list[int]:
    """The counted processes still running (same pid, same start time, not a zombie)."""
    left = []
    for pid, start in counted.processes.items():
        stat = _stat(pid)
        if stat is None or stat[1] != start:
            continue
        with contextlib.suppress(OSError):
            state = (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
            if state != "Z":
                left.append(pid)
    return left


def clean_up(counted: Census, grace_s: float = 20.0) -> tuple[list[int], list[Path]]:
    """End what is left of a stopped run: SIGTERM, then SIGKILL after `grace_s`; unlink its
    /dev/shm files once no process of it holds them. Returns what had to be ended and removed."""
    ended = alive(counted)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in alive(counted):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while alive(counted) and time.monotonic() < deadline:
            time.sleep(0.2)
    removed = []
    for path in sorted(counted.shm):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed.append(path)
    return ended, removed


def stop(process: subprocess.Popen[Any], timeout_s: float = STOP_TIMEOUT_S) -> None:
    """Stop a child started in a session of its own: SIGTERM, so that it shuts down what it
    started; if it is not gone within `timeout_s`, SIGKILL its whole process group (its session's
    leader's group: the child's own processes, nothing else)."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@dataclass
class Supervised:
    """A child started by `supervised`; `ended` is filled when the block ends."""

    process: subprocess.Popen[Any]
    ended: list[int] = field(default_factory=list)


@contextlib.contextmanager
def supervised(
    command: list[str],
    env: Mapping[str, str] | None = None,
    interval_s: float = WATCH_INTERVAL_S,
    stop_timeout_s: float = STOP_TIMEOUT_S,
    grace_s: float = 20.0,
    **popen: Any,
) -> Iterator[Supervised]:
    """Start `command` as a run of its own: in a session of its own, carrying a fresh run mark
    (which a local run inside it keeps), counted every `interval_s` while the block runs. When
    the block ends, however it ends (an interrupt too), stop it (`stop`) and end whatever of it
    is left (`clean_up`): what had to be ended is in `ended`."""
    run = RunCensus()
    process = subprocess.Popen(
        command, env=dict(os.environ if env is None else env) | run.environment,
        start_new_session=True, **popen,
    )  # fmt: skip
    child = Supervised(process)
    try:
        with run.watching(interval_s):
            yield child
    finally:
        # What runs now is what may outlive the child's own shutdown.
        run.take()
        stop(process, timeout_s=stop_timeout_s)
        child.ended, _ = clean_up(run.take(), grace_s=grace_s)
