"""What a request asks of the router: its prompt as text, the model (or adapter) it names, and
the chained chunk hashes the routers and the replicas' reports name prefixes by. Standard
library only (Ray's request types are read by attribute): the routers ship whole."""

from __future__ import annotations

import hashlib
from typing import Any

from serving.router.adapters import ADAPTER_MARK, adapter_of, request_model

DEFAULT_CHUNK_CHARS = 256
DEFAULT_MAX_CHUNKS = 256


def prompt_text(pending_request: Any) -> str:
    """The prompt a request carries: chat messages or a completion prompt. The request is the
    parsed OpenAI request on Serve's path, a namespace of the JSON body on the HAProxy path."""
    if pending_request is None or not pending_request.args:
        return ""
    return request_text(pending_request.args[0])


def request_model_of(pending_request: Any) -> str | None:
    """The model id a request asks for (`serving.router.adapters.request_model`)."""
    if pending_request is None:
        return None
    metadata = getattr(pending_request, "metadata", None)
    multiplexed = getattr(metadata, "multiplexed_model_id", "") or ""
    first = pending_request.args[0] if pending_request.args else None
    return request_model(first, multiplexed)


def request_text(request: Any) -> str:
    """`prompt_text` of one request object (anything with `messages` or `prompt` attributes):
    the replica reads what it serves with it, so router and replica name the same prefixes. An
    adapter's prompt is marked with the adapter: vLLM caches it apart from the base model's."""
    text = _plain_text(request)
    adapter = adapter_of(getattr(request, "model", None))
    return f"{ADAPTER_MARK}{adapter}\n{text}" if text and adapter else text


def _plain_text(request: Any) -> str:
    messages = getattr(request, "messages", None)
    if isinstance(messages, list):
        parts = []
        for message in messages:
            if isinstance(message, dict):
                role, content = message.get("role"), message.get("content")
            else:
                role, content = getattr(message, "role", None), getattr(message, "content", None)
            if isinstance(content, list):
                content = " ".join(
                    str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content
                )
            parts.append(f"{role}:{content}")
        return "\n".join(parts)
    prompt = getattr(request, "prompt", None)
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], str):
        return prompt[0]
    return prompt if isinstance(prompt, str) else ""


def chunk_hashes(text: str, chunk_chars: int, max_chunks: int) -> list[int]:
    """Chained hashes of the prompt's whole chunks: equal hashes mean equal prefixes. Stable
    across processes (Python's own str hash is salted per process), so a replica reporting
    the chunks its engine holds names them as the router does."""
    hashes, previous = [], b""
    for start in range(0, min(len(text), chunk_chars * max_chunks) - chunk_chars + 1, chunk_chars):
        digest = hashlib.blake2b(
            previous + text[start : start + chunk_chars].encode(), digest_size=8
        )
        previous = digest.digest()
        hashes.append(int.from_bytes(previous, "big", signed=True))
    return hashes
