"""`servestack check-edge`: after `pulumi up`, prove from outside that a model's route at the
edge refuses requests without the right key and answers the right one.

A misconfigured controller drops the API-key check and reloads without it, and nothing in
`pulumi up` reports that; this probe sees the result as a client does. The key comes from the
environment, never from the command line (where shell history and `ps` would keep it).
"""

from __future__ import annotations

import os
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass

from serving.errors import ServestackError
from serving.measure.target import KEY_VARIABLE

WRONG_KEY = "servestack-check-edge-not-a-key"
TIMEOUT_S = 15.0


@dataclass(frozen=True)
class Probe:
    name: str
    authorization: str | None
    want_refused: bool


@dataclass(frozen=True)
class Result:
    probe: Probe
    status: int | None
    error: str | None = None

    @property
    def holds(self) -> bool:
        if self.status is None:
            return False
        refused = self.status in (401, 403)
        return refused if self.probe.want_refused else 200 <= self.status < 300


def probes(key: str) -> list[Probe]:
    return [
        Probe("no key", None, want_refused=True),
        Probe("a wrong key", f"Bearer {WRONG_KEY}", want_refused=True),
        Probe("the key under the Basic scheme", f"Basic {key}", want_refused=True),
        Probe("the key", f"Bearer {key}", want_refused=False),
    ]


def route_url(url: str, model: str) -> str:
    """The model's OpenAI models endpoint behind the edge (`/<model>/v1/models`)."""
    return f"{url.rstrip('/')}/{model}/v1/models"


def _status(
    target: str, authorization: str | None, context: ssl.SSLContext | None
) -> tuple[int | None, str | None]:
    request = urllib.request.Request(target, method="GET")
    if authorization is not None:
        request.add_header("Authorization", authorization)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S, context=context) as response:
            return int(response.status), None
    except urllib.error.HTTPError as exc:
        return int(exc.code), None
    except (urllib.error.URLError, OSError) as exc:
        return None, str(getattr(exc, "reason", exc))


def check_edge(
    url: str, model: str, *, key: str | None = None, ca_file: str | None = None
) -> list[Result]:
    """Probe the route; each result says whether the gate held for that request."""
    if not url.startswith(("https://", "http://")):
        raise ServestackError(
            "check-edge", "URL", f"'{url}' is not an http(s) URL",
            "pass the edge's address, e.g. https://llm.example.com",
        )  # fmt: skip
    key = key if key is not None else os.environ.get(KEY_VARIABLE)
    if not key:
        raise ServestackError(
            "check-edge", KEY_VARIABLE, "is not set, so the right key cannot be tried",
            f"export {KEY_VARIABLE}=<one of servestack:api_keys> and run it again",
        )  # fmt: skip
    context = ssl.create_default_context(cafile=ca_file) if url.startswith("https://") else None
    target = route_url(url, model)
    results = []
    for probe in probes(key):
        status, error = _status(target, probe.authorization, context)
        results.append(Result(probe, status, error))
    return results
