"""What a local run would write outside its own directory and the build folder, were its
components left to their defaults: the end-to-end tests compare it before and after a run; and
which CPUs a local run's vLLM engines bound their threads to."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import psutil

from serving.local.runtime.places import RUN_DIR_PARENT, RUN_DIR_PREFIX, run_owner

TMP = Path("/tmp")


def default_places() -> tuple[Path, ...]:
    """Exactly the directories the components write to when left to their defaults, as their own
    code names them in this environment: Ray's sessions, Serve's HAProxy files, torch's compile
    cache (its precompiled headers follow only the temporary directory). Nothing else under
    /tmp is watched: a folder another program made there is none of the run's business."""
    from ray._common.utils import get_default_ray_temp_dir
    from ray.serve._private.constants import (
        RAY_SERVE_HAPROXY_CONFIG_FILE_LOC,
        RAY_SERVE_HAPROXY_SERVER_STATE_BASE,
    )
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    return tuple(
        dict.fromkeys(
            Path(place)
            for place in (
                get_default_ray_temp_dir(),
                Path(RAY_SERVE_HAPROXY_CONFIG_FILE_LOC).parent,
                RAY_SERVE_HAPROXY_SERVER_STATE_BASE,
                default_cache_dir(),
            )
        )
    )


def written_by_default() -> set[str]:
    """What is there now: the entries two levels into those directories, every socket directly
    in /tmp (where vLLM's and ZeroMQ's IPC sockets go by default) and every run's own directory
    (each must be gone when its run is over) but those of runs still live: another local run on
    this machine, whose owner still runs, is none of the watched run's doing."""
    found: set[str] = set()
    for place in default_places():
        if place.is_dir():
            for inner in place.iterdir():
                found.add(str(inner))
                if inner.is_dir() and not inner.is_symlink():
                    found |= {str(deeper) for deeper in inner.iterdir()}
    found |= {str(entry) for entry in TMP.iterdir() if entry.is_socket()}
    found |= {
        str(run) for run in RUN_DIR_PARENT.glob(f"{RUN_DIR_PREFIX}*") if not _live(run_owner(run))
    }
    return found


def _live(pid: int | None) -> bool:
    return pid is not None and psutil.pid_exists(pid)


def simulated_engine(spec: Any, monkeypatch: Any) -> Any:
    """The profile's compiled LLMConfig served by the simulated engine outside Serve (no
    simulated delays, a 4,096-token prefix cache)."""
    from compiled_support import compile_spec
    from ray.llm._internal.serve.core.configs.llm_config import LLMConfig

    from serving.local.engine.simulated import SimulatedEngine
    from serving.local.engine.simulation import SETTINGS_ENV, settings_from_plan
    from serving.local.runtime.app import local_application

    settings = settings_from_plan(spec, time_scale=0.0, cache_tokens=4096)
    monkeypatch.setenv(SETTINGS_ENV, settings.model_dump_json())
    config = local_application(compile_spec(spec))["args"]["llm_configs"][0]
    return SimulatedEngine(LLMConfig(**config))


# vLLM's engine core logs the CPUs it binds each rank's threads to (ompmultiprocessing.py).
CORE_IDS = re.compile(r"local_rank=\d+, core ids=(\[[\d, ]*\])")


def engines_cores() -> list[str]:
    """The CPUs each vLLM engine of this process's local Ray bound its threads to, from the
    session's logs."""
    import ray

    node = ray._private.worker._global_node
    assert node is not None, "a local Ray is running"
    logs = Path(node.get_session_dir_path()) / "logs"
    return sorted(
        match.group(1)
        for log in logs.glob("worker-*")
        for match in CORE_IDS.finditer(log.read_text(errors="replace"))
    )
