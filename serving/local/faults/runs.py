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

A session is one local Ray (`serving.local.runtime.local_ray.local_serve`) with one HAProxy
hard-stop setting: Ray reads it when its processes start. `run_session` runs in its own process
(started by `serving.local.faults.sessions`) and prints one JSON report per fault. Every wait in it
has a deadline (`serving.local.faults.actions`), and a watchdog ends the process, naming the fault
and the step, if one is overrun: a hang is reported as a hang.

What a client sees is classified per request by `serving.local.faults.load`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any, Literal

from pydantic import Field

from serving.catalog.environment import RAY_REDIS_ADDRESS, RAY_SERVE_HAPROXY_HARD_STOP_AFTER_S
from serving.frozen import Frozen
from serving.local.engine.simulation import SimulationSettings
from serving.local.faults.actions import (
    CONTROL_CALL_S,
    Watchdog,
    deploy,
    fault_application,
    kill_controller,
    kill_replica_actor,
    kill_replica_process,
    note,
    restart_gcs,
    running_at,
    server_deployment,
    wait_until,
)
from serving.local.faults.load import (
    FaultLoad,
    InFlight,
    StreamResult,
    first_success_after,
    retryable,
    run_streams,
    stream_bodies,
)
from serving.spec.parts import Autoscaling
from serving.spec.profile import ModelSpec

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
REPORT_PREFIX = "SERVESTACK_FAULT_REPORT "


class FaultReport(Frozen):
    session: str
    fault: FaultName
    hard_stop_s: int
    streams: int = Field(description="Every stream of the fault, both waves.")
    in_flight: int = Field(description="Streams started before the fault.")
    accepted: int = Field(description="Streams that got HTTP 200.")
    completed: int
    refused: int = Field(description="Clean errors before any token: a client can retry.")
    cut: int = Field(description="Accepted, tokens sent, then broken mid-stream.")
    hung: int
    late_failed: int = Field(description="Streams sent after the fault that did not complete.")
    late_unclean: int = Field(
        description="Streams sent after the fault that failed other than by a retryable refusal."
    )
    refused_statuses: list[int] = Field(
        default_factory=list, description="HTTP status of each refusal; 0 for a broken connection."
    )
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


class _Wave:
    """One wave of streams, run by a thread of its own so the fault can strike meanwhile."""

    def __init__(
        self,
        endpoint: str,
        bodies: list[dict[str, Any]],
        load: FaultLoad,
        origin: float,
        in_flight: InFlight,
        *,
        spread_s: float,
        after_fault: bool,
    ) -> None:
        self.results: list[StreamResult] = []

        def run() -> None:
            self.results += asyncio.run(run_streams(
                endpoint, bodies, load, origin, in_flight,
                spread_s=spread_s, after_fault=after_fault,
            ))  # fmt: skip

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def join(self, timeout_s: float) -> bool:
        self._thread.join(timeout_s)
        return not self._thread.is_alive()


def _stream_bound_s(load: FaultLoad, stream_s: float) -> float:
    """The longest a wave can take: its spread, then every stream either finishing (with room
    for the replicas' slowdown under a fault) or meeting the stall timeout."""
    return max(load.spread_s, load.late_spread_s) + 3 * stream_s + load.stall_s + 30


def run_fault(
    fault: FaultName,
    running: Any,
    load: FaultLoad,
    session: str,
    hard_stop_s: int,
    stream_s: float,
    watchdog: Watchdog,
) -> FaultReport:
    """One fault against the running local application, under its own load."""
    name = running.model
    deployment = server_deployment(name)
    base = fault_application(
        running.application, deployment, load.replicas, load.graceful_shutdown_s
    )
    settle_s = load.recover_timeout_s * 2
    began = time.monotonic()
    note(f"{fault}: settle at {load.replicas} replicas", began)
    with watchdog.step(fault, "settle at the starting replicas", settle_s):
        deploy(base)
        if wait_until(lambda: running_at(name, load.replicas), time.monotonic(), settle_s) is None:
            raise RuntimeError(f"{name} did not reach {load.replicas} replicas before {fault}")
        time.sleep(2.0)  # HAProxy's config for the settled replicas
    note(f"{fault}: settled; first wave", began)
    in_flight = InFlight()
    origin = time.monotonic()
    first_wave = _Wave(
        running.endpoint, stream_bodies(name, load, load.streams, 0), load, origin, in_flight,
        spread_s=load.spread_s, after_fault=False,
    )  # fmt: skip
    time.sleep(load.fault_at_s)
    fault_time = time.monotonic()
    # New short requests from the moment of the fault, while it plays out.
    first: list[float | None] = []
    prober = threading.Thread(target=lambda: first.append(first_success_after(
        running.endpoint, name, fault_time, load.recover_timeout_s
    )), daemon=True)  # fmt: skip
    prober.start()
    target: int | None = load.replicas
    killed: str | None = None
    note(f"{fault}: strike", began)
    with watchdog.step(fault, "strike", load.recover_timeout_s):
        if fault == "replica-actor-kill":
            killed = kill_replica_actor(in_flight.busiest())
        elif fault == "replica-process-kill":
            killed = kill_replica_process(in_flight.busiest())
        elif fault == "controller-kill":
            kill_controller()
            target = None
        elif fault == "gcs-restart":
            restart_gcs()
        else:  # scale-up-down: up, and once the new replica serves, the late wave, then down
            deploy(fault_application(running.application, deployment, load.replicas + 1,
                                     load.graceful_shutdown_s))  # fmt: skip
            scaled = wait_until(lambda: running_at(name, load.replicas + 1), time.monotonic(),
                                load.recover_timeout_s)  # fmt: skip
            note(f"{fault}: at {load.replicas + 1} replicas after {scaled} s", began)
    note(f"{fault}: late wave", began)
    late_wave = _Wave(
        running.endpoint, stream_bodies(name, load, load.late_streams, 1), load, origin,
        in_flight, spread_s=load.late_spread_s, after_fault=True,
    )  # fmt: skip
    if fault == "scale-up-down":
        time.sleep(load.scale_hold_s)
        with watchdog.step(fault, "scale down", CONTROL_CALL_S * 2):
            deploy(base)
    note(f"{fault}: recover", began)
    # Counted from the fault, with `recover_timeout_s` from now (a scaling's hold is over).
    budget = time.monotonic() - fault_time + load.recover_timeout_s
    with watchdog.step(fault, "recover", budget + load.recover_timeout_s + 10):
        recovered = wait_until(lambda: running_at(name, target, killed), fault_time, budget)
        prober.join(load.recover_timeout_s + 10)
    first_s = first[0] if first else None
    note(f"{fault}: first answer {first_s}, recovered {recovered}; streams end", began)
    bound = _stream_bound_s(load, stream_s)
    with watchdog.step(fault, "streams end", bound):
        for wave in (first_wave, late_wave):
            if not wave.join(bound):
                raise TimeoutError("a wave of streams outlived every stream's own timeouts")
    note(f"{fault}: done", began)
    return summarize(
        session, fault, hard_stop_s, first_wave.results + late_wave.results,
        fault_time - origin, first_s, recovered,
    )  # fmt: skip


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
    late = [r for r in results if r.after_fault]
    errors = sorted({r.error for r in results if r.error})[:5]
    return FaultReport(
        session=session, fault=fault, hard_stop_s=hard_stop_s, streams=len(results),
        in_flight=sum(1 for r in results if not r.after_fault),
        accepted=sum(1 for r in results if r.status == 200), completed=count["completed"],
        refused=count["refused"], cut=count["cut"], hung=count["hung"],
        late_failed=sum(1 for r in late if r.outcome != "completed"),
        late_unclean=sum(
            1 for r in late
            if r.outcome != "completed" and not (r.outcome == "refused" and retryable(r.status))
        ),
        refused_statuses=sorted(r.status or 0 for r in results if r.outcome == "refused"),
        fault_at_s=round(fault_at_s, 2),
        first_success_after_fault_s=None if first is None else round(first, 2),
        recovered_s=None if recovered is None else round(recovered, 2),
        longest_failure_s=round(max(failures), 2) if failures else None, errors=errors,
    )  # fmt: skip


# --- one session ---------------------------------------------------------------------------


class Session(Frozen):
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
    stream and a margin, as on the cluster) under every fault, in one local Ray whose GCS keeps
    its tables in Redis when the GCS restart is among them (as every RayService does)."""
    sessions = []
    if reproduce and "scale-up-down" in faults:
        sessions.append(
            Session(
                name="hard-stop-shorter-than-streams",
                hard_stop_s=max(1, int(stream_s / 4)),
                faults=("scale-up-down",),
            )
        )
    sessions.append(Session(
        name="servestack", hard_stop_s=int(stream_s * 2 + 30), faults=tuple(faults),
        redis=any(fault in REDIS_FAULTS for fault in faults),
    ))  # fmt: skip
    return sessions


def run_session(
    spec: ModelSpec,
    settings: SimulationSettings,
    session: Session,
    load: FaultLoad,
    stream_s: float,
) -> list[FaultReport]:
    """Inside one process: start the local Ray with the session's hard stop, run its faults."""
    from serving.local.runtime.local_ray import local_serve

    watchdog = Watchdog(session.name)
    os.environ[RAY_SERVE_HAPROXY_HARD_STOP_AFTER_S] = str(session.hard_stop_s)
    fixed = spec.model_copy(update={"autoscaling": Autoscaling(
        min_replicas=load.replicas, max_replicas=load.replicas + 1,
        target_ongoing_requests=spec.autoscaling.target_ongoing_requests,
    )})  # fmt: skip
    reports = []
    with contextlib.ExitStack() as stack:
        if session.redis:
            # Ray's node reads it at start: the GCS keeps its tables there (GCS fault tolerance).
            os.environ[RAY_REDIS_ADDRESS] = stack.enter_context(local_redis())
        with watchdog.step("-", "start the local Ray and the application", 600):
            # Ray's draining wait kept: these runs stop replicas while requests arrive.
            running = stack.enter_context(local_serve(fixed, settings, drain_s=None))
        for fault in session.faults:
            report = run_fault(fault, running, load, session.name, session.hard_stop_s,
                               stream_s, watchdog)  # fmt: skip
            reports.append(report)
            print(REPORT_PREFIX + report.model_dump_json(), flush=True)
        # Leaving the stack shuts Ray down; the runner bounds that from outside.
    return reports


@contextlib.contextmanager
def local_redis() -> Iterator[str]:
    """A throwaway redis-server on loopback (no persistence): its address."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not installed (Debian: apt-get install redis-server)")
    from serving.local.runtime.ports import held_ports

    # Held until Redis is gone: nothing else on the machine can take it first.
    with held_ports(1) as (port,):
        process = subprocess.Popen(
            [
                binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 30
            while True:
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                    break
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError(f"redis-server did not listen on port {port} within 30 s")
                time.sleep(0.2)
            yield f"127.0.0.1:{port}"
        finally:
            process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)


def main() -> None:
    """`python -m serving.local.faults.runs SPEC SETTINGS SESSION LOAD STREAM_S` (JSON
    documents)."""
    spec = ModelSpec.model_validate_json(sys.argv[1])
    settings = SimulationSettings.model_validate_json(sys.argv[2])
    session = Session.model_validate_json(sys.argv[3])
    load = FaultLoad.model_validate_json(sys.argv[4])
    run_session(spec, settings, session, load, float(sys.argv[5]))


if __name__ == "__main__":
    main()
