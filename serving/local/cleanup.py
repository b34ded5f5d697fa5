"""What a local run leaves behind, found while it runs and removed after its Ray has stopped.

Ray's shutdown stops its own processes, but vLLM's engine processes are children of a replica,
not Ray actors: a replica that is killed leaves them orphaned, still holding their `/dev/shm`
segments (vLLM's message queues, torch's shared tensors). So before the shutdown the run takes a
census of every process that descends from it, and of the `/dev/shm` files they hold; after it,
whichever of those is still there is ended (by pid, checked against its start time so a reused
pid is never touched) or unlinked. Linux only, read from /proc; no dependency.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

PROC = Path("/proc")
SHM = Path("/dev/shm")


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


def descendants(root: int) -> dict[int, int]:
    """Every live process below `root`, pid -> start time."""
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
            if child not in found and child in starts:
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


def census(root: int | None = None) -> Census:
    """The run's processes and the /dev/shm files they hold, now."""
    processes = descendants(os.getpid() if root is None else root)
    shm: set[Path] = set()
    for pid in processes:
        shm |= _shm_held(pid)
    return Census(processes, frozenset(shm))


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
