"""Fault runs on the local data plane: real Ray Serve and its real HAProxy on the CPU, the
simulated engine, a bounded, seeded load of long streamed requests, and one fault at a time.

Faults, each while streams are in flight:

- `replica-actor-kill`: Ray kills one LLM replica's actor (`ray.kill`, no restart);
- `replica-process-kill`: SIGKILL to that actor's worker process;
- `scale-up-down`: the deployment goes to one more replica and back (Serve rewrites HAProxy's
  config and reloads it each time);
- `controller-kill`: Ray kills the Serve controller (Ray restarts it);
- `gcs-restart`: the head's GCS server is killed and started again on its port, its tables in a
  local Redis (`redis-server`), as KubeRay's GCS fault tolerance does with a new head.

A session is one local Ray (`serving.local.runtime.local_serve`) with one HAProxy hard-stop
setting: Ray reads it when its processes start. `run_session` runs in its own process and
prints one JSON report per fault; `run_sessions` starts those processes.

What a client sees is classified per request by `serving.local.fault_load`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from serving.compiler import llm_configs_of
from serving.local.fault_load import (
    FaultLoad,
    InFlight,
    StreamResult,
    first_success_after,
    run_streams,
    stream_bodies,
)
from serving.local.simulation import SimulationSettings
from serving.spec import Autoscaling, ModelSpec

FaultName = Literal[
    "replica-actor-kill", "replica-process-kill", "scale-up-down", "controller-kill", "gcs-restart"
]
FAULTS: tuple[FaultName, ...] = (
    "scale-up-down",
    "replica-actor-kill",
    "replica-process-kill",
    "controller-kill",
    "gcs-restart",
)
# The GCS restart needs GCS fault tolerance: a Redis the GCS keeps its tables in (Debian's
# redis-server here, as the cluster has Memorystore).
REDIS_FAULTS: tuple[FaultName, ...] = ("gcs-restart",)
HARD_STOP_VARIABLE = "RAY_SERVE_HAPROXY_HARD_STOP_AFTER_S"
REPORT_PREFIX = "SERVESTACK_FAULT_REPORT "


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FaultReport(_Frozen):
    session: str
    fault: FaultName
    hard_stop_s: int
    streams: int
    accepted: int = Field(description="Streams that got HTTP 200.")
    completed: int
    refused: int = Field(description="Clean errors before any token: a client can retry.")
    cut: int = Field(description="Accepted, tokens sent, then broken mid-stream.")
    hung: int
    fault_at_s: float
    first_success_after_fault_s: float | None = Field(
        description="From the fault to the first new request answered."
    )
    recovered_s: float | None = Field(
        description="From the fault until Serve reports the application running at its target "
        "replicas (the controller answering, for controller-kill)."
    )
    longest_failure_s: float | None = Field(
        description="Slowest time from a failed stream's start to its error: hangs show here."
    )
    errors: list[str] = Field(default_factory=list)


# --- the faults (inside the process that started the local Ray) ---------------------------


def _llm_replicas() -> list[str]:
    """Names of the LLM deployment's replica actors (not the router or ingress)."""
    import ray
    from ray.serve._private.common import REPLICA_ID_FULL_ID_STR_PREFIX
    from ray.serve._private.constants import SERVE_NAMESPACE

    names = [
        actor["name"]
        for actor in ray.util.list_named_actors(all_namespaces=True)
        if actor["namespace"] == SERVE_NAMESPACE
        and actor["name"].startswith(REPLICA_ID_FULL_ID_STR_PREFIX)
    ]
    servers = [n for n in names if "LLMServer" in n or "LLMDeployment" in n]
    return sorted(servers or names)


def _replica(unique_id: str | None) -> str:
    """The replica actor with this unique id (the busiest one), else the first."""
    names = _llm_replicas()
    chosen = [name for name in names if unique_id and name.endswith(f"#{unique_id}")]
    return (chosen or names)[0]


def kill_replica_actor(unique_id: str | None) -> None:
    import ray
    from ray.serve._private.constants import SERVE_NAMESPACE

    ray.kill(ray.get_actor(_replica(unique_id), namespace=SERVE_NAMESPACE), no_restart=True)


def kill_replica_process(unique_id: str | None) -> None:
    import ray
    from ray.serve._private.constants import SERVE_NAMESPACE

    actor = ray.get_actor(_replica(unique_id), namespace=SERVE_NAMESPACE)
    found: Any = ray.get(actor.__ray_call__.remote(lambda self: os.getpid()), timeout=30)
    pid = int(found)
    os.kill(pid, signal.SIGKILL)


def kill_controller() -> None:
    import ray
    from ray.serve._private.constants import SERVE_CONTROLLER_NAME, SERVE_NAMESPACE

    ray.kill(ray.get_actor(SERVE_CONTROLLER_NAME, namespace=SERVE_NAMESPACE), no_restart=False)


def restart_gcs() -> None:
    """Kill the GCS and start it again on the same port (raylets and workers reconnect there),
    as Ray's own GCS fault-tolerance tests do."""
    from ray._private import worker

    node = worker._global_node
    assert node is not None, "the local Ray was started by this process"
    port = int(str(node.gcs_address).rsplit(":", 1)[1])
    node.kill_gcs_server()
    node._ray_params.gcs_server_port = port
    node.start_gcs_server()


def fault_application(
    application: dict[str, Any], replicas: int, graceful_shutdown_s: int
) -> dict[str, Any]:
    """The running application at a fixed number of replicas, with the graceful shutdown the
    RayService gives its replicas."""
    app: dict[str, Any] = json.loads(json.dumps(application))
    for _, config in llm_configs_of(app["args"]):
        deployment = config["deployment_config"]
        deployment["autoscaling_config"] |= {"min_replicas": replicas, "max_replicas": replicas}
        deployment["graceful_shutdown_timeout_s"] = graceful_shutdown_s
    return app


def deploy(application: dict[str, Any]) -> None:
    from ray.serve.context import _get_global_client
    from ray.serve.schema import ServeDeploySchema

    client = _get_global_client()
    assert client is not None
    client.deploy_apps(ServeDeploySchema.model_validate({"applications": [application]}))


def running_at(name: str, replicas: int | None) -> bool:
    """The application RUNNING, with its LLM deployment at `replicas` replicas when given."""
    from ray import serve

    try:
        status = serve.status().applications.get(name)
    except Exception:  # the controller is restarting
        return False
    if status is None or "RUNNING" not in str(status.status):
        return False
    return replicas is None or len(_llm_replicas()) == replicas


def wait_until(check: Callable[[], bool], since: float, timeout_s: float) -> float | None:
    deadline = since + timeout_s
    while time.monotonic() < deadline:
        if check():
            return time.monotonic() - since
        time.sleep(0.5)
    return None


def run_fault(
    fault: FaultName, running: Any, load: FaultLoad, session: str, hard_stop_s: int
) -> FaultReport:
    """One fault against the running local application, under its own load."""
    name = running.model
    base = fault_application(running.application, load.replicas, load.graceful_shutdown_s)
    deploy(base)
    if wait_until(lambda: running_at(name, load.replicas), time.monotonic(), 300) is None:
        raise RuntimeError(f"{name} did not reach {load.replicas} replicas before {fault}")
    time.sleep(2.0)  # HAProxy's config for the settled replicas
    bodies = stream_bodies(name, load)
    origin = time.monotonic()
    results: list[StreamResult] = []
    in_flight = InFlight()
    loader = threading.Thread(
        target=lambda: results.extend(
            asyncio.run(run_streams(running.endpoint, bodies, load, origin, in_flight))
        )
    )
    loader.start()
    time.sleep(load.fault_at_s)
    fault_time = time.monotonic()
    target: int | None = load.replicas
    if fault == "replica-actor-kill":
        kill_replica_actor(in_flight.busiest())
    elif fault == "replica-process-kill":
        kill_replica_process(in_flight.busiest())
    elif fault == "controller-kill":
        kill_controller()
        target = None
    elif fault == "gcs-restart":
        restart_gcs()
    else:
        deploy(fault_application(running.application, load.replicas + 1, load.graceful_shutdown_s))
        time.sleep(load.scale_hold_s)
        deploy(base)
    first = first_success_after(running.endpoint, name, fault_time, load.recover_timeout_s)
    recovered = wait_until(lambda: running_at(name, target), fault_time, load.recover_timeout_s)
    loader.join()
    return summarize(session, fault, hard_stop_s, results, fault_time - origin, first, recovered)


def summarize(
    session: str,
    fault: FaultName,
    hard_stop_s: int,
    results: Sequence[StreamResult],
    fault_at_s: float,
    first: float | None,
    recovered: float | None,
) -> FaultReport:
    count = {
        o: sum(1 for r in results if r.outcome == o)
        for o in ("completed", "refused", "cut", "hung")
    }
    failures = [r.end_s - r.start_s for r in results if r.outcome != "completed"]
    errors = sorted({r.error for r in results if r.error})[:5]
    return FaultReport(
        session=session, fault=fault, hard_stop_s=hard_stop_s, streams=len(results),
        accepted=sum(1 for r in results if r.status == 200), completed=count["completed"],
        refused=count["refused"], cut=count["cut"], hung=count["hung"],
        fault_at_s=round(fault_at_s, 2),
        first_success_after_fault_s=None if first is None else round(first, 2),
        recovered_s=None if recovered is None else round(recovered, 2),
        longest_failure_s=round(max(failures), 2) if failures else None, errors=errors,
    )  # fmt: skip


# --- sessions -----------------------------------------------------------------------------


class Session(_Frozen):
    """One local Ray: a name, HAProxy's hard stop, and the faults it runs in order."""

    name: str
    hard_stop_s: int
    faults: tuple[FaultName, ...]
    redis: bool = Field(default=False, description="GCS fault tolerance on a local Redis.")


def default_sessions(
    stream_s: float, faults: Sequence[FaultName], *, reproduce: bool = True
) -> list[Session]:
    """Ray's reload behaviour reproduced with a hard stop shorter than the streams (where the
    faults include scaling and `reproduce`), then servestack's setting (twice the longest
    stream and a margin, as on the cluster) under every fault."""
    sessions = []
    if reproduce and "scale-up-down" in faults:
        sessions.append(
            Session(
                name="hard-stop-shorter-than-streams",
                hard_stop_s=max(1, int(stream_s / 4)),
                faults=("scale-up-down",),
            )
        )
    hard_stop_s = int(stream_s * 2 + 30)
    plain = tuple(f for f in faults if f not in REDIS_FAULTS)
    if plain:
        sessions.append(Session(name="servestack", hard_stop_s=hard_stop_s, faults=plain))
    with_redis = tuple(f for f in faults if f in REDIS_FAULTS)
    if with_redis:
        sessions.append(
            Session(name="gcs-on-redis", hard_stop_s=hard_stop_s, faults=with_redis, redis=True)
        )
    return sessions


def run_session(
    spec: ModelSpec, settings: SimulationSettings, session: Session, load: FaultLoad
) -> list[FaultReport]:
    """Inside one process: start the local Ray with the session's hard stop, run its faults."""
    from serving.local.runtime import local_serve

    os.environ[HARD_STOP_VARIABLE] = str(session.hard_stop_s)
    fixed = spec.model_copy(update={"autoscaling": Autoscaling(
        min_replicas=load.replicas, max_replicas=load.replicas + 1,
        target_ongoing_requests=spec.autoscaling.target_ongoing_requests,
    )})  # fmt: skip
    reports = []
    with contextlib.ExitStack() as stack:
        if session.redis:
            os.environ["RAY_REDIS_ADDRESS"] = stack.enter_context(local_redis())
        running = stack.enter_context(local_serve(fixed, settings))
        for fault in session.faults:
            reports.append(run_fault(fault, running, load, session.name, session.hard_stop_s))
            print(REPORT_PREFIX + reports[-1].model_dump_json(), flush=True)
    return reports


@contextlib.contextmanager
def local_redis() -> Iterator[str]:
    """A throwaway redis-server on loopback (no persistence): its address."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not installed (Debian: apt-get install redis-server)")
    from serving.local.runtime import free_port

    port = free_port()
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
        if process.poll() is None:
            process.kill()


def run_sessions(
    spec: ModelSpec,
    settings: SimulationSettings,
    sessions: Sequence[Session],
    load: FaultLoad,
    *,
    timeout_s: float = 1800.0,
    on_report: Callable[[FaultReport], None] | None = None,
) -> list[FaultReport]:
    """Each session in its own process (Ray reads HAProxy's settings when it starts)."""
    reports: list[FaultReport] = []
    for session in sessions:
        command = [
            sys.executable, "-m", "serving.local.faults", spec.model_dump_json(),
            settings.model_dump_json(), session.model_dump_json(), load.model_dump_json(),
        ]  # fmt: skip
        found: list[FaultReport] = []
        with tempfile.TemporaryFile(mode="w+") as log:
            process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True)
            deadline = threading.Timer(timeout_s, process.kill)
            deadline.start()
            try:
                assert process.stdout is not None
                for line in process.stdout:
                    if line.startswith(REPORT_PREFIX):
                        found.append(FaultReport.model_validate_json(line[len(REPORT_PREFIX) :]))
                        if on_report is not None:
                            on_report(found[-1])
                code = process.wait()
            finally:
                deadline.cancel()
            if code != 0 or len(found) != len(session.faults):
                log.seek(0)
                tail = log.read()[-2000:]
                raise RuntimeError(f"fault session {session.name} failed ({code}): {tail}")
        reports += found
    return reports


def main() -> None:
    spec = ModelSpec.model_validate_json(sys.argv[1])
    settings = SimulationSettings.model_validate_json(sys.argv[2])
    session = Session.model_validate_json(sys.argv[3])
    load = FaultLoad.model_validate_json(sys.argv[4])
    run_session(spec, settings, session, load)


if __name__ == "__main__":
    main()
