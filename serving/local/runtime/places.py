"""Where a local run writes: its own directory and the repo's ignored build folder, nowhere else.

- The run's own directory, made when the run starts and removed when it ends, holds what lives
  only as long as the run: HAProxy's configuration and sockets, and the temporary files of every
  process the run starts (`TMPDIR`, which vLLM's IPC sockets and Python's `tempfile` follow;
  torch's cache there is a link into the build folder). Sockets live there, so its path is
  short and under /tmp, never
  under a temporary directory the caller chose: HAProxy refuses a socket path over 97 bytes and
  Ray's HAProxy manager puts each node's files in a directory named by its 56-character id.
- Ray's sessions (`RAY_DIR`, in place of /tmp/ray): logs, Ray's own sockets, spilled objects.
  They are kept after the run, as Ray keeps /tmp/ray, so a run that failed can be read
  afterwards; the oldest are removed once there are more than `KEPT_SESSIONS`. Ray's sockets
  lie 60-odd bytes below it, so the checkout's path must be short enough: checked before Ray
  starts (`ray_temp_dir`), with what would work, rather than left to Ray's own refusal.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from serving.local.runtime.app import VLLM_CACHE_DIR, Engine
from serving.paths import BUILD_DIR, CODE_ROOT

RAY_DIR = BUILD_DIR / "ray"
# What torch keeps in the temporary directory (see `run_directory`).
TORCH_TMP_CACHE_DIR = VLLM_CACHE_DIR / "torch-tmp"
# Sessions of finished runs kept in RAY_DIR (a session of a live run is never removed).
KEPT_SESSIONS = 10
# sizeof(sockaddr_un.sun_path) on Linux, less the terminating NUL.
SOCKET_PATH_MAX = 107
# Ray's longest socket below its temp dir, as node.py lays it out: the session's directory
# (`session_<date with microseconds>_<pid of the process starting the head>`), then
# `sockets/plasma_store` (the raylet's is `sockets/raylet`).
_SESSION_DATE = datetime(2000, 1, 1).strftime("%Y-%m-%d_%H-%M-%S_%f")
_RAY_SOCKET = "sockets/plasma_store"
# The run's own directory: /tmp and a short random name (see above for why).
RUN_DIR_PARENT = Path("/tmp")
RUN_DIR_PREFIX = "ss-"
# In each run's directory: the id of the process whose run it is, so that what watches /tmp can
# tell the directory of another live run on this machine from one a run left behind.
RUN_OWNER_FILE = "owner"


class PlaceError(RuntimeError):
    """A local run cannot keep its files where it must; the message says what would work."""


def ray_socket_path(ray_dir: Path, pid: int) -> str:
    """The longest socket path Ray makes below `ray_dir` for a head started by process `pid`."""
    return f"{ray_dir}/session_{_SESSION_DATE}_{pid}/{_RAY_SOCKET}"


def ray_temp_dir(ray_dir: Path = RAY_DIR, pid: int | None = None) -> Path:
    """Ray's temp dir for a local run started by process `pid` (this one by default): made,
    its old sessions pruned; a clear error if Ray's sockets would not fit there."""
    socket = ray_socket_path(ray_dir, os.getpid() if pid is None else pid)
    size = len(socket.encode())
    if size > SOCKET_PATH_MAX:
        over = size - SOCKET_PATH_MAX
        raise PlaceError(
            f"Ray's sockets for a local run would be at {socket} ({size} bytes), over the "
            f"{SOCKET_PATH_MAX} bytes a Unix socket's path may have: the repo's path "
            f"({CODE_ROOT}) is {over} characters too long for the local run to keep Ray's session "
            f"in {ray_dir}; clone it at a shorter path"
        )
    ray_dir.mkdir(parents=True, exist_ok=True)
    prune_sessions(ray_dir)
    return ray_dir


def prune_sessions(ray_dir: Path, keep: int = KEPT_SESSIONS) -> list[Path]:
    """Remove the oldest sessions beyond the newest `keep`, leaving any whose starting process
    still runs (another local run on this machine). Returns what was removed."""
    sessions = sorted(
        (p for p in ray_dir.glob("session_*") if p.is_dir() and not p.is_symlink()),
        key=lambda p: p.name,  # the name carries the start time, to the microsecond
    )
    removed = []
    for old in sessions[: max(len(sessions) - keep, 0)]:
        pid = old.name.rsplit("_", 1)[-1]
        if pid.isdigit() and Path(f"/proc/{pid}").exists():
            continue
        shutil.rmtree(old, ignore_errors=True)
        removed.append(old)
    return removed


@contextlib.contextmanager
def run_directory(engine: Engine = "simulated") -> Iterator[Path]:
    """The run's own directory, removed with everything in it when the block ends. For the real
    engine, torch's cache in its temporary directory is a link into the build folder: torch
    puts its precompiled headers (about 120 MB each, made once per set of compile options, a
    minute's work on two cores) only there, and they are kept for the next run."""
    # Python caches its temp dir on first use: settle it now, so that a process whose first use
    # comes while a run's TMPDIR is set does not keep the run's directory after it is gone.
    tempfile.gettempdir()
    with tempfile.TemporaryDirectory(prefix=RUN_DIR_PREFIX, dir=RUN_DIR_PARENT) as name:
        path = Path(name)
        (path / RUN_OWNER_FILE).write_text(str(os.getpid()))
        (path / "tmp").mkdir()
        if engine == "vllm":
            from torch._inductor.runtime.cache_dir_utils import default_cache_dir

            TORCH_TMP_CACHE_DIR.mkdir(parents=True, exist_ok=True)
            (path / "tmp" / Path(default_cache_dir()).name).symlink_to(TORCH_TMP_CACHE_DIR)
        yield path


def run_owner(run_dir: Path) -> int | None:
    """The process whose run the directory is, where it says so."""
    try:
        text = (run_dir / RUN_OWNER_FILE).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def run_dir_env(run_dir: Path) -> dict[str, str]:
    """The environment that keeps a run's processes' temporary files in its own directory."""
    return {"TMPDIR": str(run_dir / "tmp")}
