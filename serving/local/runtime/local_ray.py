"""Start a local Ray on the CPU, deploy a model's application as the RayService would, stop it.

The application is deployed through Serve's controller from the same config document the
RayService carries (`serveConfigV2`), so Ray's builder runs inside the cluster, reading the
cluster's environment, exactly as on Kubernetes.

Ray reads its fast-path variables when a process starts (and Serve's modules at import), so one
process hosts one local Ray with one environment: comparisons of configurations run one process
each (`python -m serving.local.runtime.local_ray`, used by the benchmark).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from serving.catalog.environment import (
    RAY_METRICS_REPORT_INTERVAL_MS,
    RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S,
    RAY_SERVE_FALLBACK_PROXY_HTTP_PORT,
    RAY_SERVE_HAPROXY_CONFIG_FILE_LOC,
    RAY_SERVE_HAPROXY_METRICS_PORT,
    RAY_SERVE_HAPROXY_METRICS_SOCKET_PATH,
    RAY_SERVE_HAPROXY_SERVER_STATE_BASE,
    RAY_SERVE_HAPROXY_SERVER_STATE_FILE,
    RAY_SERVE_HAPROXY_SOCKET_PATH,
    RAY_SERVE_HAPROXY_STATS_PORT,
)
from serving.compile.compiler import CompiledModel, compile
from serving.local.engine.simulation import SimulationSettings
from serving.local.engine.tiny_models import tiny_model
from serving.local.runtime import cleanup, places, ports
from serving.local.runtime.app import (
    CPU_STARTUP_DIR,
    Engine,
    cpus_needed,
    local_application,
    local_env,
    tiny_family,
)
from serving.local.runtime.lora import LocalAdapter, LocalLoraError
from serving.local.runtime.observed import ObservedRun, registered
from serving.local.runtime.ports import RunPorts, run_ports
from serving.local.runtime.progress import STATE_PREFIX
from serving.local.runtime.readiness import LocalServeError, wait_haproxy_settled, wait_ready
from serving.paths import CODE_ROOT
from serving.plan.planner import Plan, plan
from serving.spec.profile import ModelSpec

READY_PREFIX = "SERVESTACK_LOCAL_READY "
# An argument of `main` naming an error verdict a bench's baseline runs despite (its code after
# it): only the benchmark passes it, never `servestack serve --local`.
ACCEPT_FLAG = "--accept-verdict="
# Written to stderr once Ray is up: its session directory, which holds its logs.
SESSION_PREFIX = "local Ray's session (its logs): "
DEFAULT_READY_TIMEOUT_S = 600.0
# A local Ray's object store: the simulation passes small objects only.
OBJECT_STORE_BYTES = 256 * 2**20


# Ray's processes push their metrics to the node's exporter every 10 s by default
# (`metrics_report_interval_ms`). A local run is watched by `servestack top` every few seconds
# and the benchmark reads the engine's figures as soon as its load is done, so a local Ray's
# processes push every second.
METRICS_REPORT_INTERVAL_MS = 1000

# Under direct ingress Ray keeps every stopping ingress replica 30 s, however idle, for an
# external load balancer to forget it. A local run has none: its HAProxy is Ray's own and is
# stopped first when the run ends, so that wait only delays each run's end (each configuration
# of a benchmark, each test's teardown) by 30 s. The fault runs, which stop replicas while
# requests arrive, keep Ray's default (`local_serve(drain_s=None)`), as a cluster would.
LOCAL_DRAIN_S = 0.0


@dataclass(frozen=True)
class LocalServe:
    """A running local application."""

    endpoint: str
    model: str
    application: dict[str, Any]
    env: dict[str, str]


def free_port() -> int:
    """A port free now, let go at once: for a command line that checks and binds the port in
    another process (`servestack serve --local --port`). A run's own components get held ports
    (`serving.local.runtime.ports`)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def run_env(
    compiled: CompiledModel,
    settings: SimulationSettings | None,
    run_dir: Path,
    ports: RunPorts,
    engine: Engine = "simulated",
    drain_s: float | None = LOCAL_DRAIN_S,
) -> dict[str, str]:
    """The local env plus this run's own ports, HAProxy files and temporary files, so that two
    local runs on one machine (another engineer's tests) never share a port or a socket, and a run
    writes nothing outside its own directory and the build folder. `drain_s`: how long a stopping
    replica waits for load balancers to forget it (`LOCAL_DRAIN_S`); None, Ray's default."""
    env = local_env(compiled, settings, engine=engine) | places.run_dir_env(run_dir)
    if drain_s is not None:
        env[RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S] = f"{drain_s:g}"
    env |= {
        RAY_SERVE_FALLBACK_PROXY_HTTP_PORT: str(ports.fallback_proxy),
        RAY_SERVE_HAPROXY_STATS_PORT: str(ports.haproxy_stats),
        RAY_SERVE_HAPROXY_METRICS_PORT: str(ports.haproxy_metrics),
        RAY_METRICS_REPORT_INTERVAL_MS: str(METRICS_REPORT_INTERVAL_MS),
        RAY_SERVE_HAPROXY_CONFIG_FILE_LOC: str(run_dir / "haproxy.cfg"),
        RAY_SERVE_HAPROXY_SOCKET_PATH: str(run_dir / "admin.sock"),
        RAY_SERVE_HAPROXY_SERVER_STATE_BASE: str(run_dir),
        RAY_SERVE_HAPROXY_SERVER_STATE_FILE: str(run_dir / "server-state"),
        RAY_SERVE_HAPROXY_METRICS_SOCKET_PATH: str(run_dir / "metrics.sock"),
        "PYTHONPATH": os.pathsep.join(
            p
            for p in (
                str(CPU_STARTUP_DIR) if engine == "vllm" else "",
                str(CODE_ROOT),
                os.environ.get("PYTHONPATH", ""),
            )
            if p
        ),
    }
    return env


def refusal(model_plan: Plan, accepts: Collection[str] = ()) -> str | None:
    """Why the plan forbids serving the model, as `servestack plan` words its first error
    verdict; None when it has none. A local run refuses what the cluster's deploy would, but
    for the verdicts a bench's baseline `accepts` by code."""
    refused = [v for v in model_plan.verdicts if v.severity == "error" and v.code not in accepts]
    if not refused:
        return None
    first = refused[0]
    more = f" (and {len(refused) - 1} more: see `servestack plan`)" if len(refused) > 1 else ""
    return (
        f"{model_plan.model}: {first.severity} [{first.code}] {first.message} "
        f"(profile field: {first.field}){more}"
    )


@contextlib.contextmanager
def local_serve(
    spec: ModelSpec,
    settings: SimulationSettings | None,
    *,
    engine: Engine = "simulated",
    port: int | None = None,
    ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S,
    on_state: Callable[[str], None] | None = None,
    adapters: Sequence[LocalAdapter] | None = None,
    accepts: Collection[str] = (),
    drain_s: float | None = LOCAL_DRAIN_S,
) -> Iterator[LocalServe]:
    """Start a local Ray, deploy the application, wait until HTTP answers; always shut down,
    leaving no process and no /dev/shm segment of the run behind. `on_state` hears each step
    (starting Ray, the replicas' states, stopping). The real engine serves `adapters` (the
    profile's own when not given) as tiny LoRA adapters. `accepts`: error verdicts a bench's
    baseline runs despite (`serving.local.bench.runner.Variant.accepts`). `drain_s`: see
    `run_env`."""
    say = on_state or (lambda text: None)
    model_plan = plan(spec)
    refused = refusal(model_plan, accepts)
    if refused is not None:
        raise LocalServeError(refused)
    model = tiny_model(tiny_family(spec)) if engine == "vllm" else None
    compiled = compile(spec, model_plan)
    try:
        application = local_application(compiled, engine, model, adapters)
    except LocalLoraError as exc:
        raise LocalServeError(str(exc)) from None
    try:
        ray_dir = places.ray_temp_dir()
    except places.PlaceError as exc:
        raise LocalServeError(str(exc)) from None
    with (
        places.run_directory(engine) as run_dir,
        run_ports(port) as chosen,
        _sigterm_kept() as keep_sigterm,
    ):
        run = cleanup.RunCensus()
        env = run_env(compiled, settings, run_dir, chosen, engine, drain_s) | run.environment
        saved = {key: os.environ.get(key) for key in env}
        os.environ.update(env)
        try:
            import ray
            from ray import serve

            try:
                with run.watching():
                    say("starting a local Ray")
                    _start_ray(ray, chosen.ray_metrics, cpus_needed(compiled), ray_dir)
                    keep_sigterm()
                    node = ray._private.worker._global_node
                    assert node is not None, "ray.init started the local node"
                    session = node.get_session_dir_path()
                    # Kept after the run: where its logs are, for whoever reads this one's output.
                    print(f"{SESSION_PREFIX}{session}", file=sys.stderr, flush=True)
                    scrape = {"ray": f"http://127.0.0.1:{chosen.ray_metrics}/metrics"}
                    _check_exporter(scrape["ray"], "Ray's metrics agent", "ray_", session)
                    say("starting Serve")
                    serve.start(http_options={"host": "127.0.0.1", "port": chosen.http})
                    _deploy(application)
                    endpoint = f"http://127.0.0.1:{chosen.http}"
                    wait_ready(application["name"], endpoint, ready_timeout_s, say)
                    if spec.fast_paths.haproxy:
                        say("replicas ready; waiting for HAProxy's configuration to settle")
                    wait_haproxy_settled(run_dir)
                    if spec.fast_paths.haproxy:
                        scrape["haproxy"] = f"http://127.0.0.1:{chosen.haproxy_metrics}/metrics"
                        _check_exporter(
                            scrape["haproxy"], "HAProxy's Prometheus exporter", "haproxy_", session
                        )
                    observed = ObservedRun(os.getpid(), spec.name, endpoint, scrape)
                    with registered(observed):
                        yield LocalServe(endpoint, spec.name, application, env)
            finally:
                # What runs now is what may outlive Ray's shutdown (vLLM's engine processes).
                run.take()
                try:
                    say("stopping Serve")
                    with contextlib.suppress(Exception):
                        serve.shutdown()  # type: ignore[no-untyped-call]
                    say("stopping Ray")
                    ray.shutdown()
                    keep_sigterm()
                finally:
                    # Whatever still carries the run's mark outlived the shutdown (Ray's agents
                    # wait for their raylet's death to be told to its GCS, blind to SIGTERM).
                    _end_leftovers(run, say)
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def _start_ray(ray: Any, metrics_port: int, cpus: int, ray_dir: Path) -> None:
    try:
        ray.init(
            address="local",
            _metrics_export_port=metrics_port,
            num_cpus=cpus,
            num_gpus=0,
            object_store_memory=OBJECT_STORE_BYTES,
            include_dashboard=False,
            log_to_driver=False,
            namespace="servestack-local",
            _temp_dir=str(ray_dir),
        )
    except Exception as exc:  # Ray says why in its own words; its logs say more
        raise LocalServeError(
            f"the local Ray did not start: {exc} — its logs are in "
            f"{ray_dir / 'session_latest' / 'logs'}; where dashboard_agent.log says 'Address "
            f"already in use', another process had taken port {metrics_port}, the one this run "
            "gave Ray's metrics agent: start the run again"
        ) from None


def _check_exporter(url: str, service: str, family_prefix: str, session: str) -> None:
    """What `servestack top` and the benchmark will scrape answers as `service` now, or the run
    stops here with why, rather than every later scrape timing out."""
    problem = ports.exporter_problem(
        url, service, family_prefix=family_prefix, timeout_s=ports.EXPORTER_READY_TIMEOUT_S
    )
    if problem is not None:
        raise LocalServeError(f"{problem} (the local Ray's logs: {session}/logs)")


def _end_leftovers(run: cleanup.RunCensus, say: Callable[[str], None]) -> None:
    ended, removed = cleanup.clean_up(run.take())
    if ended or removed:
        say(f"ended {len(ended)} leftover processes, removed {len(removed)} files")
        print(
            f"ended {len(ended)} processes and removed {len(removed)} /dev/shm files the local "
            "Ray left behind",
            file=sys.stderr,
            flush=True,
        )


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def _sigterm_kept() -> Iterator[Callable[[], None]]:
    """Yields what puts back the SIGTERM handler of the process hosting the run; restores it
    at the end.

    `ray.init` replaces the handler with its own (`sys.exit`), and the core worker it starts
    puts abseil's failure handler under it, which aborts the process 3 s after a SIGTERM: the
    run would die mid-shutdown, without stopping Serve and Ray, ending their leftovers or
    removing its directory (Ray's agents were found orphaned so). So once Ray is up, and again
    once it is down, the host's handler is put back: a handler of its own (the serve command's
    stops the run), or one that exits through the run's clean-up where it had none."""
    if threading.current_thread() is not threading.main_thread():  # signals are the main's
        yield lambda: None
        return
    previous = signal.getsignal(signal.SIGTERM)
    kept = previous if callable(previous) or previous == signal.SIG_IGN else _exit_on_sigterm

    def keep() -> None:
        signal.signal(signal.SIGTERM, kept)

    try:
        yield keep
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def _deploy(application: dict[str, Any]) -> None:
    from ray.serve.context import _get_global_client
    from ray.serve.schema import ServeDeploySchema

    config = ServeDeploySchema.model_validate({"applications": [application]})
    client = _get_global_client()
    assert client is not None, "serve.start() connects the client"
    client.deploy_apps(config)


def serve_until_stopped(
    spec: ModelSpec,
    settings: SimulationSettings | None,
    *,
    engine: Engine = "simulated",
    port: int | None = None,
    on_ready: Any = None,
    ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S,
    on_state: Callable[[str], None] | None = None,
    accepts: Collection[str] = (),
) -> None:
    """Run until SIGINT or SIGTERM, then shut down cleanly."""
    stop = threading.Event()
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, lambda *_: stop.set())
    try:
        with local_serve(
            spec, settings, engine=engine, port=port, ready_timeout_s=ready_timeout_s,
            on_state=on_state, accepts=accepts,
        ) as running:  # fmt: skip
            if on_ready is not None:
                on_ready(running)
            while not stop.wait(0.5):
                pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main() -> None:
    """`python -m serving.local.runtime.local_ray SPEC_JSON SETTINGS_JSON|null [ENGINE]
    [--accept-verdict=CODE ...]`: one local run for the benchmark, which reads the endpoint from
    the ready line and stops it with SIGTERM."""
    spec = ModelSpec.model_validate(json.loads(sys.argv[1]))
    raw = json.loads(sys.argv[2])
    settings = None if raw is None else SimulationSettings.model_validate(raw)
    rest = sys.argv[3:]
    accepts = [arg[len(ACCEPT_FLAG) :] for arg in rest if arg.startswith(ACCEPT_FLAG)]
    engine: Engine = "vllm" if "vllm" in rest else "simulated"

    def announce(running: LocalServe) -> None:
        print(READY_PREFIX + running.endpoint, flush=True)

    def tell(text: str) -> None:
        print(STATE_PREFIX + text, flush=True)

    try:
        serve_until_stopped(
            spec, settings, engine=engine, on_ready=announce, on_state=tell, accepts=accepts
        )
    except LocalServeError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
