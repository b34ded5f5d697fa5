"""Where a local run writes (its own directory, Ray's sessions in the build folder), and that a
run hosted inside another run's process stays part of it for the clean-up."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from serving.local.runtime import cleanup, places

# Ray's HAProxy manager names each node's directory by its 56-character id; HAProxy refuses a
# socket path over 97 bytes (it binds a temporary name with the path's pid suffix).
NODE_ID = "f" * 56
HAPROXY_SOCKET_MAX = 97
# A pid no process has (Linux's pid_max is at most 2^22).
DEAD_PID = 99_999_999


def test_the_socket_limit_checked_is_rays_own() -> None:
    from ray._private.utils import validate_socket_filepath

    pid = 4_194_304
    base = len(places.ray_socket_path(Path("/"), pid))
    at_limit = Path("/" + "d" * (places.SOCKET_PATH_MAX - base))
    validate_socket_filepath(places.ray_socket_path(at_limit, pid))
    over = Path(f"{at_limit}d")
    with pytest.raises(OSError, match="cannot exceed"):
        validate_socket_filepath(places.ray_socket_path(over, pid))
    with pytest.raises(places.PlaceError, match=r"1 characters too long") as refused:
        places.ray_temp_dir(over, pid)
    assert str(over) in str(refused.value) and not over.exists()


def test_old_sessions_are_pruned_but_never_a_live_runs(tmp_path: Path) -> None:
    dead = [
        tmp_path / f"session_2026-01-{day:02d}_00-00-00_000000_{DEAD_PID}" for day in range(1, 13)
    ]
    live = tmp_path / f"session_2025-12-31_00-00-00_000000_{os.getpid()}"
    for session in [*dead, live]:
        (session / "logs").mkdir(parents=True)
    (tmp_path / "session_latest").symlink_to(dead[-1])
    removed = places.prune_sessions(tmp_path, keep=10)
    # The eleven oldest are beyond the newest ten; the live run's, oldest of all, stays.
    assert removed == dead[:2]
    assert live.is_dir() and all(session.is_dir() for session in dead[2:])
    assert (tmp_path / "session_latest").resolve() == dead[-1]


def test_the_runs_own_directory_fits_haproxys_sockets_and_is_gone_after() -> None:
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    with places.run_directory("vllm") as run_dir:
        env = places.run_dir_env(run_dir)
        assert Path(env["TMPDIR"]).is_dir() and Path(env["TMPDIR"]).parent == run_dir
        assert len(str(run_dir / NODE_ID / "metrics.sock")) <= HAPROXY_SOCKET_MAX
        (run_dir / NODE_ID).mkdir()
        (run_dir / NODE_ID / "haproxy.cfg").write_text("global\n")
        # Where torch puts its precompiled headers for a process of the run: the build folder.
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("TMPDIR", env["TMPDIR"])
            patch.setattr(tempfile, "tempdir", None)
            torch_cache = Path(default_cache_dir())
        assert torch_cache.parent == Path(env["TMPDIR"])
        assert torch_cache.resolve() == places.TORCH_TMP_CACHE_DIR.resolve()
    assert not run_dir.exists() and places.TORCH_TMP_CACHE_DIR.is_dir()


def test_a_run_inside_another_runs_process_keeps_its_mark_for_what_it_orphans() -> None:
    # The benchmark's runtime process (or a fault session's) hosts a run of its own and is killed
    # before its clean-up: what its run started, orphaned, is still the enclosing run's.
    outer = cleanup.RunCensus()
    inner = (
        "import os, subprocess, sys\n"
        "from serving.local.runtime import cleanup\n"
        "run = cleanup.RunCensus()\n"
        "orphan = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'],\n"
        "                          env=os.environ | run.environment, start_new_session=True,\n"
        "                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "print(run.mark, orphan.pid, flush=True)\n"
    )
    host = subprocess.run(
        [sys.executable, "-c", inner], env=os.environ | outer.environment, capture_output=True,
        text=True, check=True, timeout=60,
    )  # fmt: skip
    mark, orphan = host.stdout.split()
    try:
        assert mark == outer.mark
        counted = outer.take()
        assert int(orphan) in counted.processes
        ended, _ = cleanup.clean_up(counted, grace_s=5)
        assert ended == [int(orphan)]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(orphan), signal.SIGKILL)


def test_a_process_its_host_started_before_the_run_is_not_the_runs_despite_the_mark(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A fault session's process: the enclosing run's mark in its environment, a Redis server
    # started before its local Ray, then the run's own processes.
    monkeypatch.setenv(cleanup.RUN_VARIABLE, "enclosing-run")
    earlier = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        run = cleanup.RunCensus()
        assert run.mark == "enclosing-run"
        ours = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        try:
            counted = run.take()
            assert ours.pid in counted.processes and earlier.pid not in counted.processes
        finally:
            ours.kill()
            ours.wait()
    finally:
        earlier.kill()
        earlier.wait()


def test_a_live_runs_directory_is_not_what_another_run_left_behind() -> None:
    """The /tmp check of the end-to-end tests counts a run's directory left behind, never that
    of another run still live on the machine (its owner, who removes it, still runs)."""
    from local_support import written_by_default

    with places.run_directory() as live:
        assert places.run_owner(live) == os.getpid()
        assert str(live) not in written_by_default()
        # Its owner gone (a run killed before its clean-up), the directory is a leftover.
        (live / places.RUN_OWNER_FILE).write_text("999999999")
        assert str(live) in written_by_default()
