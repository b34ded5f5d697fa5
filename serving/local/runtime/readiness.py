"""When a local application is ready to be measured: Serve says RUNNING, it answers HTTP, and
the HAProxy in front of it has stopped reloading."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from serving.local.runtime.progress import replica_summary


class LocalServeError(RuntimeError):
    """The local application did not come up; the message says what Serve reported."""


def wait_ready(name: str, endpoint: str, timeout_s: float, say: Callable[[str], None]) -> None:
    from ray import serve

    deadline = time.monotonic() + timeout_s
    said = ""
    while True:
        status = serve.status().applications.get(name)
        state = str(status.status) if status is not None else "NOT_STARTED"
        if status is not None:
            summary = replica_summary({
                deployment: {str(getattr(k, "value", k)): n for k, n in d.replica_states.items()}
                for deployment, d in status.deployments.items()
            })  # fmt: skip
            if summary != said:
                say(said := summary)
        if status is not None and "DEPLOY_FAILED" in state:
            raise LocalServeError(f"application {name} failed to deploy: {status.message}")
        if status is not None and "RUNNING" in state and answers(endpoint):
            return
        if time.monotonic() > deadline:
            message = status.message if status is not None else ""
            raise LocalServeError(
                f"application {name} not ready after {timeout_s:.0f} s ({state}) {message}"
            )
        time.sleep(1.0)


# HAProxy reloads (a new process; the old one drains, then is hard-stopped after 120 s) each
# time Serve rewrites its config, which it does again just after the application is up: the
# replicas reach HAProxy's server list a few hundred ms after they reach the request router.
# A request caught in between gets 503 "unknown_replica_id" (the router named a replica HAProxy
# does not know yet), one caught by a reload was seen to hang until the hard stop. So a run
# starts only once the config has been still for a while, counted from when the application
# was ready (an earlier quiet spell, while replicas were still starting, proves nothing).
HAPROXY_QUIET_S = 10.0
HAPROXY_SETTLE_TIMEOUT_S = 120.0


def wait_haproxy_settled(run_dir: Path) -> None:
    ready_at = time.time()
    deadline = time.monotonic() + HAPROXY_SETTLE_TIMEOUT_S
    while time.monotonic() < deadline:
        configs = list(run_dir.rglob("*.cfg"))
        if not configs:  # HAProxy is off: Serve's own proxy does not reload
            return
        newest = max(ready_at, *(path.stat().st_mtime for path in configs))
        if time.time() - newest >= HAPROXY_QUIET_S:
            return
        time.sleep(1.0)


def answers(endpoint: str) -> bool:
    """The application answers HTTP: any reply but "no route yet" (404) or "no backend yet"
    (5xx). An application that answers with an error is up; its error is the user's to see."""
    try:
        with urllib.request.urlopen(f"{endpoint}/v1/models", timeout=5):
            return True
    except urllib.error.HTTPError as exc:
        return bool(exc.code < 500 and exc.code != 404)
    except (urllib.error.URLError, OSError):
        return False
