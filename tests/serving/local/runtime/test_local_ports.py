"""A local run's ports are held from when they are chosen until the run ends: free to the
component they are given to (it binds with SO_REUSEADDR, as Ray's metrics agent, Serve's proxy,
HAProxy, Redis and vLLM do), taken by no one else meanwhile. And an exporter that does not
answer as its service stops the run with an error naming the service and the port."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

import pytest

from serving.local.runtime import cleanup, places
from serving.local.runtime.local_ray import _start_ray
from serving.local.runtime.ports import exporter_problem, held_ports, run_ports


def _plain_bind(address: str, port: int) -> None:
    with socket.socket() as sock:
        sock.bind((address, port))


def _app(body: bytes) -> Callable[[dict[str, Any], Callable[..., Any]], list[bytes]]:
    def answer(environ: dict[str, Any], reply: Callable[..., Any]) -> list[bytes]:
        reply("200 OK", [("Content-Type", "text/plain")])
        return [body]

    return answer


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def test_a_held_port_is_the_components_and_no_one_elses() -> None:
    with held_ports(3) as ports:
        assert len(set(ports)) == 3
        for port in ports:
            for address in ("127.0.0.1", "0.0.0.0"):
                with pytest.raises(OSError, match="in use"):
                    _plain_bind(address, port)
        # The server Ray's metrics agent starts on its port (Python's wsgiref, every address):
        # it binds, listens and answers while the port is held.
        server = make_server("", ports[0], _app(b"ok"), handler_class=_Quiet)
        with server:
            threading.Thread(target=server.handle_request, daemon=True).start()
            with urllib.request.urlopen(f"http://127.0.0.1:{ports[0]}/", timeout=5) as answer:
                assert answer.read() == b"ok"
    for port in ports[1:]:  # (the first is in TIME_WAIT from its connection)
        _plain_bind("127.0.0.1", port)  # let go at the end


def test_a_users_port_is_taken_as_given_and_not_held() -> None:
    with held_ports(1) as (mine,):
        pass
    with run_ports(mine) as ports:
        assert ports.http == mine
        _plain_bind("127.0.0.1", mine)
        others = (ports.fallback_proxy, ports.haproxy_stats, ports.haproxy_metrics)
        assert len({mine, *others, ports.ray_metrics}) == 5


@pytest.fixture
def silent() -> Iterator[int]:
    """A port where connections are completed by the kernel and never answered."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield sock.getsockname()[1]


def test_a_silent_port_is_reported_with_its_service_and_port(silent: int) -> None:
    url = f"http://127.0.0.1:{silent}/metrics"
    problem = exporter_problem(url, "Ray's metrics agent", family_prefix="ray_", timeout_s=0.5)
    assert problem is not None
    assert problem.startswith(
        f"Ray's metrics agent on port {silent} ({url}) connected but sent no answer in time"
    )


def test_an_exporter_of_other_metrics_is_not_taken_for_the_service() -> None:
    text = b"# TYPE python_gc_objects_collected counter\npython_gc_objects_collected_total 1.0\n"
    server = make_server("127.0.0.1", 0, _app(text), handler_class=_Quiet)
    with server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_port}/metrics"
        try:
            problem = exporter_problem(url, "HAProxy's exporter", family_prefix="haproxy_",
                                       timeout_s=0.5)  # fmt: skip
        finally:
            server.shutdown()
    assert problem is not None and "without any haproxy_* metric" in problem


@contextlib.contextmanager
def _local_ray(metrics_port: int) -> Iterator[None]:
    """A local Ray started as a local run starts it, ended with everything it started."""
    import ray

    run = cleanup.RunCensus()
    saved = {key: os.environ.get(key) for key in run.environment}
    os.environ.update(run.environment)
    try:
        with run.watching():
            _start_ray(ray, metrics_port, 1, places.ray_temp_dir())
        yield
    finally:
        run.take()
        ray.shutdown()
        cleanup.clean_up(run.take())
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def test_rays_metrics_agent_takes_its_held_port_and_a_stuck_one_is_named() -> None:
    """Ray's agent serves its metrics one connection at a time with no timeout: one connection
    that never sends its request leaves every later scrape connected and unanswered, which is
    what a run's check reports."""
    with run_ports() as ports, _local_ray(ports.ray_metrics):
        url = f"http://127.0.0.1:{ports.ray_metrics}/metrics"
        service = "Ray's metrics agent"
        assert exporter_problem(url, service, family_prefix="ray_", timeout_s=30) is None
        with socket.create_connection(("127.0.0.1", ports.ray_metrics)):
            problem = exporter_problem(url, service, family_prefix="ray_", timeout_s=1)
        assert problem is not None
        assert f"{service} on port {ports.ray_metrics}" in problem
        assert "connected but sent no answer in time" in problem
        assert exporter_problem(url, service, family_prefix="ray_", timeout_s=30) is None
