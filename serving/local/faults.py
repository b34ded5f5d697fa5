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
setting: Ray reads it when its processes start. `run_session` runs in its own process (started
by `serving.local.fault_sessions`) and prints one JSON report per fault. Every wait in it has a
deadline, and a watchdog ends the process, naming the fault and the step, if one is overrun: a
hang is reported as a hang.

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
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from serving.compiler import llm_configs_of
from serving.local.fault_load import (
    FaultLoad,
    InFlight,
    StreamResult,
    first_success_after,
    retryable,
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
HUNG_PREFIX = "SERVESTACK_FAULT_HUNG "
HUNG_EXIT = 3
# A call into Ray's control plane (Serve's status, a deploy, the named actors) that takes longer
# is treated as not answering: the controller or the GCS is down.
CONTROL_CALL_S = 15.0
# Slack on top of a step's own deadlines before the watchdog calls it a hang.
WATCHDOG_SLACK_S = 60.0


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FaultReport(_Frozen):
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


# --- bounded calls --------------------------------------------------------------------------

T = TypeVar("T")


def bounded(call: Callable[[], T], timeout_s: float) -> T:
    """`call()`, or TimeoutError after `timeout_s`: Ray's client calls have no deadline of their
    own, and one to a dead controller or GCS would wait for ever. The call is left running in a
    daemon thread, which never holds the process open."""
    box: list[Any] = []
    done = threading.Event()

    def run() -> None:
        try:
            box.append((True, call()))
        except BaseException as exc:  # handed to the caller
            box.append((False, exc))
        done.set()

    threading.Thread(target=run, daemon=True).start()
    if not done.wait(timeout_s):
        raise TimeoutError(f"no answer after {timeout_s:.0f} s")
    ok, value = box[0]
    if not ok:
        raise value
    result: T = value
    return result


class Watchdog:
    """Ends the session's process if a step overruns its budget, after printing which fault and
    step hung, so that the runner reports the hang and removes what the process leaves."""

    def __init__(self, session: str, slack_s: float = WATCHDOG_SLACK_S) -> None:
        self._session = session
        self._slack_s = slack_s
        self._lock = threading.Lock()
        self._step: tuple[str, str, float, float] | None = None
        threading.Thread(target=self._watch, daemon=True).start()

    @contextlib.contextmanager
    def step(self, fault: str, phase: str, budget_s: float) -> Iterator[None]:
        now = time.monotonic()
        with self._lock:
            self._step = (fault, phase, now, now + budget_s + self._slack_s)
        try:
            yield
        finally:
            with self._lock:
                self._step = None

    def _watch(self) -> None:
        while True:
            time.sleep(0.5)
            with self._lock:
                step = self._step
            if step is not None and time.monotonic() > step[3]:
                fault, phase, began, _ = step
                hung = {"session": self._session, "fault": fault, "phase": phase,
                        "after_s": round(time.monotonic() - began, 1)}  # fmt: skip
                print(HUNG_PREFIX + json.dumps(hung), flush=True)
                os._exit(HUNG_EXIT)


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
    names = bounded(_llm_replicas, CONTROL_CALL_S)
    chosen = [name for name in names if unique_id and name.endswith(f"#{unique_id}")]
    return (chosen or names)[0]


def kill_replica_actor(unique_id: str | None) -> str:
    """Kill the replica's actor; its name."""
    import ray
    from ray.serve._private.constants import SERVE_NAMESPACE

    name = _replica(unique_id)
    ray.kill(ray.get_actor(name, namespace=SERVE_NAMESPACE), no_restart=True)
    return name


def kill_replica_process(unique_id: str | None) -> str:
    """SIGKILL the replica's worker process; the actor's name."""
    import ray
    from ray.serve._private.constants import SERVE_NAMESPACE

    name = _replica(unique_id)
    actor = ray.get_actor(name, namespace=SERVE_NAMESPACE)
    found: Any = ray.get(actor.__ray_call__.remote(lambda self: os.getpid()), timeout=30)
    os.kill(int(found), signal.SIGKILL)
    return name


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


def server_deployment(app_name: str) -> str:
    """The name Serve gave the application's LLM deployment."""
    from ray import serve

    status = bounded(serve.status, CONTROL_CALL_S).applications[app_name]
    names = [name for name in status.deployments if name.startswith("LLMServer")]
    if len(names) != 1:
        raise RuntimeError(f"expected one LLMServer deployment in {app_name}: {status.deployments}")
    return names[0]


def fault_application(
    application: dict[str, Any], deployment: str, replicas: int, graceful_shutdown_s: int
) -> dict[str, Any]:
    """The running application at a fixed number of replicas, with the graceful shutdown the
    RayService gives its replicas. Both through Serve's per-deployment overrides, which Serve
    applies to the running replicas: a change to the application's `args` would make every
    deployment a new version and restart every replica."""
    app: dict[str, Any] = json.loads(json.dumps(application))
    ((_, config),) = llm_configs_of(app["args"])
    autoscaling = dict(config["deployment_config"]["autoscaling_config"])
    autoscaling.pop("initial_replicas", None)
    autoscaling |= {"min_replicas": replicas, "max_replicas": replicas}
    app["deployments"] = [{
        "name": deployment, "autoscaling_config": autoscaling,
        "graceful_shutdown_timeout_s": graceful_shutdown_s,
    }]  # fmt: skip
    return app


def deploy(application: dict[str, Any]) -> None:
    from ray.serve.context import _get_global_client
    from ray.serve.schema import ServeDeploySchema

    client = _get_global_client()
    assert client is not None
    config = ServeDeploySchema.model_validate({"applications": [application]})
    bounded(lambda: client.deploy_apps(config), CONTROL_CALL_S * 2)


def running_at(name: str, replicas: int | None, gone: str | None = None) -> bool:
    """The application RUNNING, with its LLM deployment at `replicas` replicas when given, none
    of them the replica `gone` (killed: Serve still lists it until its controller notices);
    False while the controller or the GCS does not answer."""
    from ray import serve

    try:
        status = bounded(serve.status, CONTROL_CALL_S).applications.get(name)
        if status is None or "RUNNING" not in str(status.status):
            return False
        if replicas is None:
            return True
        names = bounded(_llm_replicas, CONTROL_CALL_S)
        return len(names) == replicas and gone not in names
    except Exception:
        return False


def note(message: str, since: float) -> None:
    """A step of the session in its log (the runner shows the log's end if the session fails)."""
    print(f"[{time.monotonic() - since:7.1f} s] {message}", file=sys.stderr, flush=True)


def wait_until(check: Callable[[], bool], since: float, timeout_s: float) -> float | None:
    deadline = since + timeout_s
    while time.monotonic() < deadline:
        if check():
            return time.monotonic() - since
        time.sleep(0.5)
    return None


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
    # Counted from the fault, each with `recover_timeout_s` from now (a scaling's hold is over).
    budget = time.monotonic() - fault_time + load.recover_timeout_s
    with watchdog.step(fault, "recover", budget * 2 + 10):
        first = first_success_after(running.endpoint, name, fault_time, budget)
        recovered = wait_until(lambda: running_at(name, target, killed), fault_time, budget)
    note(f"{fault}: first answer {first}, recovered {recovered}; streams end", began)
    bound = _stream_bound_s(load, stream_s)
    with watchdog.step(fault, "streams end", bound):
        for wave in (first_wave, late_wave):
            if not wave.join(bound):
                raise TimeoutError("a wave of streams outlived every stream's own timeouts")
    note(f"{fault}: done", began)
    return summarize(
        session, fault, hard_stop_s, first_wave.results + late_wave.results,
        fault_time - origin, first, recovered,
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
    from serving.local.runtime import local_serve

    watchdog = Watchdog(session.name)
    os.environ[HARD_STOP_VARIABLE] = str(session.hard_stop_s)
    fixed = spec.model_copy(update={"autoscaling": Autoscaling(
        min_replicas=load.replicas, max_replicas=load.replicas + 1,
        target_ongoing_requests=spec.autoscaling.target_ongoing_requests,
    )})  # fmt: skip
    reports = []
    with contextlib.ExitStack() as stack:
        if session.redis:
            # Ray's node reads it at start: the GCS keeps its tables there (GCS fault tolerance).
            os.environ["RAY_REDIS_ADDRESS"] = stack.enter_context(local_redis())
        with watchdog.step("-", "start the local Ray and the application", 600):
            running = stack.enter_context(local_serve(fixed, settings))
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
    from serving.local.runtime import free_port

    port = free_port()
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
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
    """`python -m serving.local.faults SPEC SETTINGS SESSION LOAD STREAM_S` (JSON documents)."""
    spec = ModelSpec.model_validate_json(sys.argv[1])
    settings = SimulationSettings.model_validate_json(sys.argv[2])
    session = Session.model_validate_json(sys.argv[3])
    load = FaultLoad.model_validate_json(sys.argv[4])
    run_session(spec, settings, session, load, float(sys.argv[5]))


if __name__ == "__main__":
    main()
