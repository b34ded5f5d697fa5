"""What a local run would write outside its own directory and the build folder, were its
components left to their defaults: the end-to-end tests compare it before and after a run."""

from __future__ import annotations

from pathlib import Path

from serving.local.runtime.places import RUN_DIR_PARENT, RUN_DIR_PREFIX

TMP = Path("/tmp")
# Directories the components default to under /tmp: Ray's sessions, Serve's HAProxy files,
# torch's compile cache (its precompiled headers follow only the temporary directory).
DEFAULT_DIRS = ("ray", "haproxy-serve", "torchinductor_")


def written_by_default() -> set[str]:
    """What is there now: the entries two levels into those directories, every socket directly
    in /tmp (where vLLM's and ZeroMQ's IPC sockets go by default) and every run's own directory
    (each must be gone when its run is over)."""
    found: set[str] = set()
    for entry in TMP.iterdir():
        if entry.name.startswith(DEFAULT_DIRS) and entry.is_dir():
            for inner in entry.iterdir():
                found.add(str(inner))
                if inner.is_dir() and not inner.is_symlink():
                    found |= {str(deeper) for deeper in inner.iterdir()}
        elif entry.is_socket():
            found.add(str(entry))
    found |= {str(run) for run in RUN_DIR_PARENT.glob(f"{RUN_DIR_PREFIX}*")}
    return found
