"""`servestack bench --local` as a newcomer runs it, in a terminal: while the configurations
start, serve and stop, progress lines say which one, when its replicas are ready, how many
requests are done and when it has stopped, all before the table; with --json, stdout carries the
bench's document alone and nothing is drawn, even on a terminal. The table, in a terminal of 120
columns, shows every configuration's name whole.

Short form: one workload, two configurations (fast paths on and off), a few requests on the
simulated engine; each configuration starts a real local Ray.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import termios
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_support import copy_repo, servestack_command

from serving.local.bench.runner import default_variants
from serving.spec.loading import load_profile

pytestmark = pytest.mark.timeout(900)

MODEL = "llama-3.1-8b"
REQUESTS = 4
SHORT = ["bench", "--local", "--model", MODEL, "--workload", "decode-heavy",
         "--requests", str(REQUESTS), "--concurrency", "2", "--replicas", "1",
         "--time-scale", "0.01", "--repeats", "1"]  # fmt: skip
COLUMNS, ROWS = 120, 40
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


@dataclass(frozen=True)
class Ran:
    returncode: int
    terminal: str  # what the terminal received, escape sequences removed
    stdout: str  # stdout when it is piped, else ""


def run_in_terminal(cwd: Path, args: list[str], *, pipe_stdout: bool = False) -> Ran:
    """The CLI with a terminal of COLUMNS x ROWS on stderr (and on stdout unless piped)."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in {"COLUMNS", "LINES", "NO_COLOR", "CI"}}
    env["TERM"] = "xterm-256color"
    process = subprocess.Popen(
        [*servestack_command(), *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE if pipe_stdout else follower, stderr=follower,
        start_new_session=True,
    )  # fmt: skip
    os.close(follower)
    received = bytearray()
    while True:
        ready, _, _ = select.select([leader], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal's last writer has gone
                break
            if not chunk:
                break
            received += chunk
        elif process.poll() is not None and not select.select([leader], [], [], 0.5)[0]:
            break
    stdout = process.stdout.read().decode() if process.stdout is not None else ""
    process.wait()
    os.close(leader)
    return Ran(process.returncode, ANSI.sub("", received.decode(errors="replace")), stdout)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_repo(tmp_path_factory.mktemp("repo"))


@pytest.fixture(scope="module")
def runs(repo: Path) -> dict[str, Ran]:
    """The bench with its table, and with --json, at the same time: each run starts local Rays
    of its own (ports, files), and side by side they take far less than one after the other."""
    with ThreadPoolExecutor(2) as pool:
        table = pool.submit(run_in_terminal, repo, [*SHORT, "--out", str(repo / "table")])
        document = pool.submit(
            run_in_terminal, repo, [*SHORT, "--json", "--out", str(repo / "json")],
            pipe_stdout=True,
        )  # fmt: skip
        return {"table": table.result(), "json": document.result()}


@pytest.fixture(scope="module")
def in_terminal(runs: dict[str, Ran]) -> Ran:
    return runs["table"]


def configurations(repo: Path) -> list[str]:
    spec = load_profile(repo / "stacks" / "models" / f"{MODEL}.yaml")
    return [v.name for v in default_variants(spec) if "decode-heavy" in v.workloads]


def test_each_configuration_reports_its_steps_before_the_table(
    in_terminal: Ran, repo: Path
) -> None:
    assert in_terminal.returncode == 0, in_terminal.terminal[-3000:]
    text = in_terminal.terminal
    table = text.index("servestack bench --local (simulated engine")
    names = configurations(repo)
    assert len(names) == 2
    for number, name in enumerate(names, start=1):
        label = f"[{number}/{len(names)}] {name} · decode-heavy: "
        steps = [
            label + "starting a local Ray",
            label + "ready in ",
            label + f"{REQUESTS}/{REQUESTS} requests in ",
            label + "stopped in ",
        ]
        at = [text.find(step) for step in steps]
        assert -1 not in at, (steps, text[:table])
        assert at == sorted(at) and at[-1] < table, "steps in order, all before the table"
        assert f" {name} " in text[table:], "the table shows the configuration's name whole"
    requests_line = re.search(rf"{REQUESTS}/{REQUESTS} requests in ([0-9.]+) s \(([0-9.]+) req/s\)",
                              text)  # fmt: skip
    assert requests_line is not None
    took, rate = float(requests_line[1]), float(requests_line[2])
    assert rate == pytest.approx(REQUESTS / took, rel=0.2, abs=0.1)


def test_the_live_line_shows_the_replicas_states_while_ray_starts(in_terminal: Ran) -> None:
    # Serve's own replica states, told by the local runtime while the application deploys.
    text = in_terminal.terminal
    assert re.search(r"replicas: \S+ \d+/\d+ running", text[: text.index("servestack bench")])


def test_json_output_is_the_document_alone_and_nothing_is_drawn(
    runs: dict[str, Ran], repo: Path
) -> None:
    out, ran = repo / "json", runs["json"]
    assert ran.returncode == 0, ran.terminal[-3000:]
    document = json.loads(ran.stdout)
    assert document == json.loads((out / "bench.json").read_text())
    assert [r["variant"] for r in document["reports"]] == configurations(repo)
    assert "starting a local Ray" not in ran.terminal and "requests in" not in ran.terminal
    assert "replicas:" not in ran.terminal
