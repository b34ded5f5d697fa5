"""What a fault run does to the local Ray and how it reads Ray's state back, every call with a
deadline: Ray's client calls have none of their own, and one to a dead controller or GCS would
wait for ever. A watchdog ends the session's process, naming the fault and step, when a step
overruns its budget anyway.

These run inside the process that started the local Ray (`serving.local.faults.runs`)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from serving.compile.patterns import llm_configs_of

HUNG_PREFIX = "SERVESTACK_FAULT_HUNG "
HUNG_EXIT = 3
# A call into Ray's control plane (Serve's status, a deploy, the named actors) that takes longer
# is treated as not answering: the controller or the GCS is down.
CONTROL_CALL_S = 15.0
# Slack on top of a step's own deadlines before the watchdog calls it a hang.
WATCHDOG_SLACK_S = 60.0

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


# --- the faults and Ray's state ----------------------------------------------------------


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
