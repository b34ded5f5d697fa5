"""The LLM server that tells its request routers what its engine caches.

`CacheReportingServer` is Ray Serve LLM's `LLMServer` (LLMConfig.server_cls) with
`record_routing_stats`, the method Serve's controller calls on each replica every
`request_routing_stats_period_s` and whose answer reaches every router of the deployment
(`serving.router.cache_report` explains the channel and the report). It learns:

- what it serves: every OpenAI chat or completion request, on Serve's path (`chat`,
  `completions`) and on direct streaming's ASGI app (a middleware reads the body and hands it on
  untouched). Prompts are queued as they arrive and tokenized when the report is made, off the
  request path;
- what its engine holds, from the engine itself: vLLM's KV-cache events (`kv_events_config`,
  published by the engine core over ZMQ on an ipc socket private to this replica: BlockStored,
  BlockRemoved, AllBlocksCleared), or the simulated engine's cache, which tells the same events
  in-process. The tokenization is the engine's: vLLM's tokenizer and chat template, or the
  simulation's words.

A lost ZMQ message (a gap in the publisher's sequence numbers) is counted; blocks stored under
a parent the ledger never saw cannot be named and are left out (at worst a missed hit, never a
false one); the next cache reset starts the ledger clean, if the engine made it (vLLM refuses
one while requests hold blocks).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import tempfile
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Hashable, Sequence
from types import SimpleNamespace
from typing import Any

from ray.llm._internal.serve.core.server.llm_server import LLMServer

from serving.router.cache_report import REPLICA_HEADER, CacheLedger
from serving.router.prompts import request_text

SERVER_CLASS = "serving.router.cache_server:CacheReportingServer"
# OpenAI routes whose prompts reach the prefix cache.
PROMPT_PATHS = frozenset({"/v1/chat/completions", "/v1/completions"})
# Requests queued for the next report at most: beyond it the oldest are dropped (a burst between
# two reports; they still reach the report as the engine stores their blocks... once anchored).
MAX_QUEUED = 4096
VLLM_BLOCK_TOKENS = 16
logger = logging.getLogger(__name__)

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[dict[str, Any], Receive, Send], Awaitable[None]]


class PromptRecorder:
    """ASGI middleware: the body of each prompt-carrying POST goes to `record`, then the request
    goes on to the app as it came."""

    def __init__(self, app: ASGIApp, record: Callable[[bytes], None], replica: str = "") -> None:
        self.app, self.record = app, record
        self.header = (REPLICA_HEADER.encode(), replica.encode())

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        if scope.get("path") not in PROMPT_PATHS:
            await self.app(scope, receive, send)
            return
        messages, body = [], b""
        while True:
            message = await receive()
            messages.append(message)
            if message.get("type") != "http.request":
                break
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        self.record(body)
        replay = deque(messages)

        async def replayed() -> dict[str, Any]:
            return replay.popleft() if replay else await receive()

        async def named(message: dict[str, Any]) -> None:
            if message.get("type") == "http.response.start":
                message = message | {"headers": [*message.get("headers", []), self.header]}
            await send(message)

        await self.app(scope, replayed, named)


def ask_for_kv_events(llm_config: Any, endpoint: str) -> str:
    """Have the engine publish its KV-cache events on `endpoint` (unless the profile already
    configures them); returns the endpoint they come on. Through `update_engine_kwargs`: the
    LLMConfig has derived its engine config when validated, and vLLM is started from that."""
    configured = llm_config.engine_kwargs.get("kv_events_config")
    if configured:
        return str(dict(configured).get("endpoint", endpoint))
    llm_config.update_engine_kwargs(
        kv_events_config={"enable_kv_cache_events": True, "publisher": "zmq", "endpoint": endpoint}
    )
    return endpoint


def record_prompts(app: Any, record: Callable[[bytes], None], replica: str) -> Any:
    """The Starlette app with a `PromptRecorder` around its whole middleware stack: vLLM's app
    has built its stack already, and Starlette refuses `add_middleware` once it has."""
    stack = app.middleware_stack or app.build_middleware_stack()
    app.middleware_stack = PromptRecorder(stack, record=record, replica=replica)
    return app


class CacheReportingServer(LLMServer):
    """LLMServer plus `record_routing_stats`: the prefixes its engine holds."""

    # Ray Serve LLM's servers construct asynchronously (Serve awaits the constructor).
    async def __init__(self, llm_config: Any, **kwargs: Any) -> None:  # type: ignore[misc]
        self._instance = uuid.uuid4().hex[:12]
        self._queued: deque[tuple[float, Any]] = deque(maxlen=MAX_QUEUED)
        self._ledger = CacheLedger(VLLM_BLOCK_TOKENS, epoch=self._instance)
        self._tokenize: Callable[[Any], Sequence[Hashable]] | None = None
        self._events_task: asyncio.Task[None] | None = None
        self.lost_events = 0
        # vLLM publishes its KV-cache events only when asked; on an ipc socket of this
        # replica's own, so replicas sharing a machine never share an endpoint.
        self._kv_endpoint = ask_for_kv_events(
            llm_config, f"ipc://{tempfile.gettempdir()}/servestack-kv-{self._instance}"
        )
        await super().__init__(llm_config, **kwargs)
        self._attach()

    def _attach(self) -> None:
        """Listen to the engine: the simulation's cache in-process, or vLLM's event stream."""
        engine: Any = self.engine
        cache = getattr(engine, "cache", None)
        if cache is not None and hasattr(cache, "listeners"):
            # The simulated engine's cache tokenizes as the simulation does: it hands its own
            # tokenizer over, so the router's code needs nothing of the local data plane.
            self._ledger.block_tokens = cache.block_tokens
            cache.listeners.append(self._ledger)
            self._tokenize = cache.request_tokens
            return
        client = getattr(engine, "_engine_client", None)
        if client is None:
            logger.warning("no engine cache to report: routers fall back to their own history")
            return
        self._ledger.block_tokens = client.vllm_config.cache_config.block_size
        tokenizer = client.get_tokenizer()

        def vllm_tokens(request: Any) -> Sequence[Hashable]:
            messages = getattr(request, "messages", None)
            if messages is not None:
                ids = tokenizer.apply_chat_template(
                    messages, tokenize=True, add_generation_prompt=True
                )
                return list(ids)
            prompt = getattr(request, "prompt", "")
            text = prompt[0] if isinstance(prompt, list) and prompt else prompt
            return list(tokenizer.encode(text)) if isinstance(text, str) else []

        self._tokenize = vllm_tokens
        self._events_task = asyncio.get_running_loop().create_task(self._follow_vllm_events())

    async def _follow_vllm_events(self) -> None:
        import msgspec
        import zmq
        import zmq.asyncio
        from vllm.distributed.kv_events import (
            AllBlocksCleared,
            BlockRemoved,
            BlockStored,
            KVEventBatch,
        )

        decoder = msgspec.msgpack.Decoder(type=KVEventBatch)
        socket = zmq.asyncio.Context.instance().socket(zmq.SUB)
        socket.connect(self._kv_endpoint)
        socket.setsockopt(zmq.SUBSCRIBE, b"")
        last_seq = -1
        try:
            while True:
                _, seq_bytes, payload = await socket.recv_multipart()
                seq = int.from_bytes(seq_bytes, "big")
                if last_seq >= 0 and seq > last_seq + 1:
                    self.lost_events += seq - last_seq - 1
                last_seq = seq
                for event in decoder.decode(payload).events:
                    if isinstance(event, BlockStored):
                        self._ledger.stored(
                            event.block_hashes, event.parent_block_hash, event.token_ids
                        )
                    elif isinstance(event, BlockRemoved):
                        self._ledger.removed(event.block_hashes)
                    elif isinstance(event, AllBlocksCleared):
                        self._ledger.cleared()
        except asyncio.CancelledError:
            raise
        except Exception:  # the report then says only what it knew; serving goes on
            logger.exception("stopped following the engine's KV-cache events")
        finally:
            socket.close(linger=0)

    # --- what this replica serves ----------------------------------------------------------

    def _arrived(self, request: Any) -> None:
        self._queued.append((time.time(), request))

    def _arrived_body(self, body: bytes) -> None:
        with contextlib.suppress(ValueError):
            parsed = json.loads(body)
            if isinstance(parsed, dict):
                self._arrived(SimpleNamespace(**parsed))

    async def __serve_build_asgi_app__(self) -> Any:
        app = await super().__serve_build_asgi_app__()  # type: ignore[no-untyped-call]
        replica = ""
        with contextlib.suppress(RuntimeError):  # outside a Serve replica (unit tests)
            from ray import serve

            replica = serve.get_replica_context().replica_id.unique_id
        return record_prompts(app, self._arrived_body, replica)

    async def chat(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        self._arrived(request)
        return await super().chat(request, *args, **kwargs)

    async def completions(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        self._arrived(request)
        return await super().completions(request, *args, **kwargs)

    async def reset_prefix_cache(self) -> None:
        """Reset the engine's prefix cache; the ledger clears only if the engine did. vLLM
        refuses while requests hold blocks and answers whether it reset, which Ray's server
        drops (ray/llm/_internal/serve/engines/vllm/vllm_engine.py); its event saying so is
        published only after its next step (vllm/v1/core/sched/scheduler.py,
        update_from_output), so an idle engine would leave the report stale until a request
        came. Cleared on a refusal instead, the ledger could never name the prompts still
        cached, whose blocks vLLM does not store again."""
        engine_client = getattr(self.engine, "_engine_client", None)
        if engine_client is None:  # the simulated engine's cache tells the ledger itself
            await super().reset_prefix_cache()
            return
        if await engine_client.reset_prefix_cache():
            self._ledger.cleared()
        else:
            logger.warning("the engine refused to reset its prefix cache: requests hold blocks")

    # --- the report ------------------------------------------------------------------------

    def _anchor_queued(self) -> None:
        while self._queued:
            arrived, request = self._queued.popleft()
            if self._tokenize is None:
                continue
            try:
                tokens = self._tokenize(request)
            except Exception:  # a prompt the tokenizer refuses fails its request anyway
                continue
            self._ledger.served(request_text(request), tokens, now=arrived)

    async def record_routing_stats(self) -> dict[str, Any]:
        self._anchor_queued()
        report = self._ledger.report()
        for entry in report.values():
            entry["lost_events"] = self.lost_events
        return report
