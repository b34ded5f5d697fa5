"""`servestack top` against exporters that do not answer: a real socket that accepts connections
and never replies (what a stuck Ray metrics agent looks like from outside) is shown as
unreachable for the interval and asked again; one that never answers ends the command with a
clear error and a non-zero exit, not a traceback."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from cli_support import run
from repo import REPO
from rich.console import Console
from rich.table import Table
from test_top import exposition

from serving.observability.metrics import engine
from serving.observability.top import Samples, patiently, scrape, watch

INTERVAL_S = 0.3
TIMEOUT_S = 0.5


@pytest.fixture
def silent() -> Iterator[str]:
    """A listening socket nobody accepts on: the kernel completes each connection, then
    nothing is ever said on it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/metrics"


class _Exporter(BaseHTTPRequestHandler):
    """Prometheus text whose counters grow with each scrape: 10 requests and 100 tokens more."""

    scrapes = 0

    def do_GET(self) -> None:
        type(self).scrapes += 1
        n = type(self).scrapes
        body = exposition(10 * n, 100 * n, 5 * n, 10 * n).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(HTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a scraper that gave up before the answer: its broken pipe is expected


def _serve(server: HTTPServer, after_s: float = 0.0) -> threading.Thread:
    def loop() -> None:
        time.sleep(after_s)  # until then connections wait in the backlog, unanswered
        server.serve_forever(poll_interval=0.05)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def exporter() -> Iterator[str]:
    server = _Server(("127.0.0.1", 0), _Exporter)
    _serve(server)
    yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    server.shutdown()
    server.server_close()


def _text(view: Table) -> str:
    console = Console(width=200, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(view)
    return console.export_text()


def test_a_silent_exporter_is_named_each_interval_while_the_others_are_drawn(
    silent: str, exporter: str
) -> None:
    shown: list[Table] = []
    watched = watch(
        lambda: [exporter, silent], shown.append,
        interval_s=INTERVAL_S, seconds=1.5, timeout_s=TIMEOUT_S,
    )  # fmt: skip
    assert watched.tables == len(shown) >= 2
    for view in shown:
        text = _text(view)
        assert f"unreachable this interval: {silent} connected but sent no answer in time" in text
        assert exporter not in text
    # The exporter that answers is drawn from its own two scrapes: 10 requests more each.
    rows = [line for line in _text(shown[-1]).splitlines() if line.startswith("│ m ")]
    assert len(rows) == 1 and float(rows[0].split("│")[2]) > 0
    assert watched.never_answered == {silent: "connected but sent no answer in time"}


def test_an_exporter_that_answers_late_is_asked_again_and_then_drawn() -> None:
    server = _Server(("127.0.0.1", 0), _Exporter)
    url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    _serve(server, after_s=2.0)
    shown: list[Table] = []
    try:
        watched = watch(
            lambda: [url], shown.append, interval_s=INTERVAL_S, seconds=4.0, timeout_s=TIMEOUT_S
        )
    finally:
        server.shutdown()
        server.server_close()
    texts = [_text(view) for view in shown]
    assert any("unreachable this interval" in text for text in texts[:2]), texts
    assert "unreachable" not in texts[-1] and "│ m " in texts[-1], texts[-1]
    assert watched.never_answered == {}


def test_top_ends_with_an_error_naming_an_exporter_that_never_answered(silent: str) -> None:
    result = run(REPO, "top", "--url", silent, "--interval", "0.5", "--seconds", "1")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    message = " ".join(result.stderr.split())
    assert f"error: {silent} answered none of this watch's scrapes" in message
    assert "connected but sent no answer in time" in message


def _requests(samples: Samples) -> float:
    return sum(v for (name, _), v in samples.items() if name == engine("vllm:request_success"))


def test_a_patient_read_asks_a_late_exporter_again_until_its_count_is_in() -> None:
    """What the benchmark and the real-engine tests wait with: scrapes that fail while the
    exporter is not yet answering are no reading, and it asks until the count is in."""
    server = _Server(("127.0.0.1", 0), _Exporter)
    url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    _Exporter.scrapes = 0
    _serve(server, after_s=1.0)
    start = time.monotonic()
    try:
        samples = patiently(
            lambda: scrape(url, timeout_s=TIMEOUT_S), lambda s: _requests(s) >= 30, 10.0, 0.1
        )
    finally:
        server.shutdown()
        server.server_close()
    assert samples is not None and _requests(samples) >= 30
    assert time.monotonic() - start >= 1.0  # it waited out the exporter's silence


def test_a_patient_read_of_an_exporter_that_never_answers_gives_none(silent: str) -> None:
    start = time.monotonic()
    assert patiently(lambda: scrape(silent, timeout_s=0.2), lambda _: True, 1.0, 0.1) is None
    assert time.monotonic() - start < 3.0
