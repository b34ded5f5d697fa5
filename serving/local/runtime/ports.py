"""The ports a local run gives its components, held from when they are chosen until the run
ends, and the check that an exporter on one answers as the service it should be.

A port found free and then let go (bind to port 0, read it, close) can be taken by anything
before the component binds it: one of Ray's own services binding port 0, another run on the
machine. Ray's metrics agent then cannot bind its port, exits, and its raylet with it (it
fate-shares with the agent); `ray.init` fails half a minute later with "the current node timed
out during startup". So the port is held instead: a socket bound to it on every address with
SO_REUSEADDR, never listening. While it is held the kernel gives that port to no one's bind to
port 0 nor to an outgoing connection, and a bind without SO_REUSEADDR fails; the components,
which all set SO_REUSEADDR on their listening sockets (Ray's metrics agent through Python's
HTTPServer, Serve's proxy, HAProxy, Redis, vLLM's server), bind and listen on it as on a free
port. A socket that never listens receives no connection, so holding it for the whole run
costs nothing.

Ray's metrics agent serves its Prometheus text from one thread (`wsgiref`), one connection at a
time and with no timeout: a single connection that never sends its request (or never reads the
reply) leaves every later scrape unanswered, connected but silent, for as long as it stays
open. `exporter_problem` tells that, and a port held by something else, apart from an answer.
"""

from __future__ import annotations

import contextlib
import socket
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass

from serving.observability import top

# How long an exporter has to answer once its component says it is up: Ray's agent binds its
# port before the raylet registers, HAProxy before Serve reports its proxy ready, so this only
# covers a slow first scrape on a busy machine.
EXPORTER_READY_TIMEOUT_S = 30.0


@contextlib.contextmanager
def held_ports(count: int) -> Iterator[list[int]]:
    """`count` distinct ports, each held (see the module's docstring) until the block ends."""
    held: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            held.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            # Every address: a component binding 0.0.0.0 (Ray's agent on a node whose IP is not
            # loopback, HAProxy's `bind :port`) overlaps it as much as one binding 127.0.0.1.
            sock.bind(("0.0.0.0", 0))
        yield [sock.getsockname()[1] for sock in held]
    finally:
        for sock in held:
            sock.close()


@dataclass(frozen=True)
class RunPorts:
    """The ports one local run gives its components."""

    http: int  # the OpenAI endpoint: HAProxy's frontend, or Serve's proxy without HAProxy
    fallback_proxy: int  # Serve's own proxy behind HAProxy
    haproxy_stats: int
    haproxy_metrics: int
    ray_metrics: int  # Ray's metrics agent (`_metrics_export_port`)


@contextlib.contextmanager
def run_ports(http: int | None = None) -> Iterator[RunPorts]:
    """A run's ports, held until the block ends; `http` is the user's choice when given (their
    command checked it is free and it is theirs to keep so)."""
    with held_ports(4 if http else 5) as ports:
        yield RunPorts(http or ports.pop(), *ports)


def exporter_problem(url: str, service: str, *, family_prefix: str, timeout_s: float) -> str | None:
    """None once `url` answers Prometheus text with a family named `family_prefix`...; else, at
    `timeout_s`, what is wrong, naming the service and the port."""
    port = urllib.parse.urlsplit(url).port
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            samples = top.scrape(url, timeout_s=min(top.SCRAPE_TIMEOUT_S, timeout_s))
        except top.SCRAPE_ERRORS as exc:
            found = top.unreachable(exc)
        else:
            if any(name.startswith(family_prefix) for name, _ in samples):
                return None
            found = f"answered Prometheus text without any {family_prefix}* metric"
        if time.monotonic() >= deadline:
            return (
                f"{service} on port {port} ({url}) {found}, still {timeout_s:g} s after it "
                f"started: whatever holds port {port} is not {service}, or it is stuck serving "
                f"another connection"
            )
        time.sleep(1.0)
