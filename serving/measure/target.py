"""The service a `bench --url` run measures: its OpenAI base address, the key it is sent, and the
vLLM version it reports.

The URL is the OpenAI base address, as a client library's `base_url` without its `/v1`:
`http://HOST:PORT` for a port-forwarded Ray Serve, `https://EDGE/MODEL` for a model's route at
the edge. Requests go to it followed by `/v1/chat/completions`. The key comes from the
environment (`SERVESTACK_API_KEY`), never the command line, where shell history and `ps` would
keep it; it is sent as `Authorization: Bearer` and written nowhere.
"""

from __future__ import annotations

import contextlib
import json
import os
import ssl
import urllib.error
import urllib.request
from urllib.parse import urlsplit

from serving.catalog import pins
from serving.errors import ServestackError

KEY_VARIABLE = "SERVESTACK_API_KEY"
VERSION_TIMEOUT_S = 10.0


def base_url(url: str) -> str:
    """The checked base address, without a trailing slash; a `ServestackError` naming --url and
    what would work where it is not one."""
    parts = urlsplit(url)
    example = "http://127.0.0.1:8000 (a port-forward) or https://EDGE/MODEL (the edge's route)"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ServestackError(
            "command line", "--url", f"'{url}' is not an http:// or https:// address",
            f"give the service's OpenAI base address, e.g. {example}",
        )  # fmt: skip
    if parts.query or parts.fragment or parts.path.rstrip("/").endswith("/v1"):
        raise ServestackError(
            "command line", "--url", f"'{url}' is not a base address",
            f"leave out /v1 and anything after the path (/v1/chat/completions is appended), "
            f"e.g. {example}",
        )  # fmt: skip
    try:
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        raise ServestackError(
            "command line", "--url", f"'{url}' has a port that is not a number",
            f"e.g. {example}",
        ) from None  # fmt: skip
    return url.rstrip("/")


def api_key() -> str | None:
    """The key in the environment, if one is set."""
    return os.environ.get(KEY_VARIABLE) or None


def server_vllm_version(url: str) -> tuple[str, str]:
    """The vLLM version the server reports at `/version` (vLLM's OpenAI server answers it; Ray
    Serve's OpenAI app may not), else the pinned one; and which it is."""
    request = urllib.request.Request(f"{url}/version")
    key = api_key()
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    context = ssl.create_default_context() if url.startswith("https") else None
    with contextlib.suppress(urllib.error.URLError, OSError, ValueError):
        with urllib.request.urlopen(request, timeout=VERSION_TIMEOUT_S, context=context) as reply:
            version = json.loads(reply.read(4096)).get("version")
        if isinstance(version, str) and version:
            return version, "reported by the server"
    return pins.VLLM, "pinned (the server did not report it)"
