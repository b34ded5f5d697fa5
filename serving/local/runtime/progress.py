"""What a local run reports while it works: the events a view can follow, and no view.

A configuration of the benchmark, or `serve --local`, starts a local Ray (or a bare vLLM
server), waits for its replicas, sends requests and stops; starting and stopping take from
seconds (the simulated engine) to minutes (vLLM's CPU build). The runners call a `RunProgress`
at each step; how that is shown (the command line's rich view) is the caller's business, and by
default nothing is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

# What `python -m serving.local.runtime.local_ray` prints on stdout for each change of state, so
# that the process that started it can show it.
STATE_PREFIX = "SERVESTACK_LOCAL_STATE "


class RunProgress(Protocol):
    """The steps of one local run, in the order they come."""

    def configuration(self, name: str, workload: str, requests: int, starting: str) -> None:
        """A configuration begins: `starting` says what comes up ("a local Ray")."""

    def state(self, text: str) -> None:
        """What the starting (or stopping) application reports, e.g. its replicas' states."""

    def retrying(self) -> None:
        """The application did not start; the same configuration starts once more (its
        `configuration` event comes again, for the same run)."""

    def ready(self) -> None:
        """It answers (and has been warmed up); the measured requests follow."""

    def request_done(self) -> None: ...

    def stopping(self) -> None: ...

    def stopped(self) -> None: ...


class Quiet:
    """Shows nothing (--json, output that is not a terminal, tests)."""

    def configuration(self, name: str, workload: str, requests: int, starting: str) -> None:
        pass

    def state(self, text: str) -> None:
        pass

    def retrying(self) -> None:
        pass

    def ready(self) -> None:
        pass

    def request_done(self) -> None:
        pass

    def stopping(self) -> None:
        pass

    def stopped(self) -> None:
        pass


QUIET = Quiet()


def replica_summary(deployments: Mapping[str, Mapping[str, int]]) -> str:
    """Serve's replica states, per deployment, as one line: how many are running of how many,
    and what the others are doing ("LLMServer:llama 1/2 running, 1 starting")."""
    parts = []
    for name, states in deployments.items():
        total = sum(states.values())
        running = states.get("RUNNING", 0)
        others = ", ".join(
            f"{count} {state.lower()}"
            for state, count in sorted(states.items())
            if state != "RUNNING" and count
        )
        parts.append(f"{name} {running}/{total} running" + (f", {others}" if others else ""))
    return "replicas: " + ("; ".join(parts) if parts else "none yet")
