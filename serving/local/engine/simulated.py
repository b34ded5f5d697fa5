"""SimulatedEngine: a SIMULATION of vLLM behind Ray Serve LLM, for CPU runs.

Selected with RAYLLM_VLLM_ENGINE_CLS=serving.local.engine.simulated:SimulatedEngine, the hook Ray
Serve LLM 2.56 offers for replacing VLLMEngine. It generates no language: it answers the OpenAI
chat and completions APIs (streaming and not, through Serve's ingress or through direct streaming's
ASGI app) with placeholder words, paced by `serving.local.engine.simulation`'s model of prefill,
decode and a prefix cache, so that everything Ray Serve does around an engine runs for real and can
be timed.

Routing stats ride on standard OpenAI fields, so they survive every path through Serve:
- `system_fingerprint` names the replica that served the request ("sim-<replica id>");
- `usage.prompt_tokens_details.cached_tokens` says how much of the prompt hit the prefix cache
  (streams carry usage when the request asks for `stream_options.include_usage`).

LoRA: the engine serves the adapters its engine arguments name as vLLM's static `lora_modules`
(model ids `base:adapter`, as the compiler writes them under direct streaming; their paths are not
read), listed in `/v1/models`, with vLLM's `max_loras` and `max_cpu_loras` (`AdapterCache`); it
counts each adapter it loads in its metrics.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import ValidationError
from ray import serve
from ray.llm._internal.serve.core.configs.llm_config import DiskMultiplexConfig, LLMConfig
from ray.llm._internal.serve.core.configs.openai_api_models import (
    ChatCompletionRequest,
    ChatCompletionResponse,
    CompletionRequest,
    CompletionResponse,
    ErrorInfo,
    ErrorResponse,
    ModelList,
    to_model_metadata,
)
from ray.llm._internal.serve.core.engine.protocol import LLMEngine
from ray.llm._internal.serve.core.protocol import RawRequestInfo
from ray.serve.exceptions import RayServeException

from serving.local.engine.adapter_cache import AdapterCache
from serving.local.engine.metrics import EngineMetrics
from serving.local.engine.simulation import FINGERPRINT_PREFIX as FINGERPRINT_PREFIX
from serving.local.engine.simulation import (
    PrefixCache,
    SimulationSettings,
    StepLoop,
    chat_prompt,
    tokenize,
)

ENGINE_CLASS = "serving.local.engine.simulated:SimulatedEngine"
# vLLM's default when a request names no max_tokens is "the rest of the context"; a simulation
# that streams placeholder words has no reason to run that long.
DEFAULT_MAX_TOKENS = 16


class SimulatedRequestError(Exception):
    """A request the simulated engine refuses, with the OpenAI error it maps to."""

    def __init__(self, message: str, code: int = 400, param: str | None = None) -> None:
        super().__init__(message)
        self.message, self.code, self.param = message, code, param

    def response(self) -> ErrorResponse:
        kind = "NotFoundError" if self.code == 404 else "BadRequestError"
        return ErrorResponse(
            error=ErrorInfo(message=self.message, type=kind, param=self.param, code=self.code)
        )


class _Generation:
    """One request's prompt, admitted to the prefix cache, its output budget and adapter."""

    def __init__(
        self, prompt_tokens: int, cached_tokens: int, max_tokens: int, adapter: str | None = None
    ) -> None:
        self.prompt_tokens = prompt_tokens
        self.cached_tokens = cached_tokens
        self.max_tokens = max_tokens
        self.adapter = adapter


def served_adapters(engine_kwargs: dict[str, Any]) -> tuple[str, ...]:
    """The adapter model ids (`base:adapter`) vLLM's static `lora_modules` name."""
    if not engine_kwargs.get("enable_lora"):
        return ()
    return tuple(str(module["name"]) for module in engine_kwargs.get("lora_modules") or ())


def adapter_cache(engine_kwargs: dict[str, Any]) -> AdapterCache | None:
    """vLLM's LoRA slots for the engine arguments (its defaults: max_loras 1, max_cpu_loras
    max_loras); None without LoRA."""
    if not engine_kwargs.get("enable_lora"):
        return None
    gpu = int(engine_kwargs.get("max_loras") or 1)
    return AdapterCache(gpu, int(engine_kwargs.get("max_cpu_loras") or gpu))


class SimulatedEngine(LLMEngine):
    """A SIMULATED LLM engine: OpenAI API shapes and plan-derived timing, no model."""

    def __init__(self, llm_config: LLMConfig) -> None:
        self.llm_config = llm_config
        self.model_id: str = llm_config.model_id
        engine_kwargs = llm_config.engine_kwargs or {}
        self.max_model_len: int | None = engine_kwargs.get("max_model_len")
        self.settings = SimulationSettings.from_env()
        self.cache = PrefixCache(self.settings.cache_tokens, self.settings.block_tokens)
        self.fingerprint = FINGERPRINT_PREFIX + uuid.uuid4().hex[:8]
        self.adapters = served_adapters(engine_kwargs)
        self.steps = StepLoop(self.settings, adapter_cache(engine_kwargs))
        self.requests_served = 0
        self.metrics: EngineMetrics | None = None

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        try:
            replica = serve.get_replica_context().replica_id.unique_id
            self.fingerprint = f"{FINGERPRINT_PREFIX}{replica}"
        except (RuntimeError, RayServeException):  # outside a Serve replica (tests, bare server)
            pass
        if self.llm_config.log_engine_metrics:
            self.metrics = EngineMetrics(
                self.model_id, self.steps.queue_lengths, self.settings.cache_tokens
            )
            self.steps.on_scheduled = self.metrics.scheduled
            if self.steps.adapters is not None:
                self.steps.adapters.on_load = self.metrics.adapter_loaded

    async def check_health(self) -> None:
        return None

    async def reset_prefix_cache(self) -> None:
        self.cache.clear()

    async def resolve_lora(self, lora_model: DiskMultiplexConfig) -> None:
        raise NotImplementedError("the simulated engine serves no LoRA adapters")

    # --- the simulation -------------------------------------------------------------------

    def _admit(self, model: str | None, prompt: str, max_tokens: int | None) -> _Generation:
        if model is not None and model != self.model_id and model not in self.adapters:
            served = ", ".join(f"`{name}`" for name in (self.model_id, *self.adapters))
            raise SimulatedRequestError(
                f"The model `{model}` does not exist; this server serves {served}.",
                code=404,
                param="model",
            )
        tokens = tokenize(prompt)
        wanted = DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens
        if wanted < 1:
            raise SimulatedRequestError("max_tokens must be at least 1", param="max_tokens")
        if self.max_model_len is not None and len(tokens) + wanted > self.max_model_len:
            raise SimulatedRequestError(
                f"This model's maximum context length is {self.max_model_len} tokens. However, "
                f"you requested {len(tokens) + wanted} tokens ({len(tokens)} in the messages, "
                f"{wanted} in the completion). Please reduce the length of the messages or "
                "completion.",
                param="max_tokens",
            )
        cached = self.cache.admit(tokens)
        self.requests_served += 1
        if self.metrics is not None:
            self.metrics.admitted(len(tokens), cached)
        adapter = model if model is not None and model != self.model_id else None
        return _Generation(len(tokens), cached, wanted, adapter)

    async def _words(self, generation: _Generation) -> AsyncIterator[str]:
        """The output, paced by the replica's engine steps: the uncached prompt is prefilled in
        chunks beside the sequences already decoding, then one word comes per step."""
        uncached = generation.prompt_tokens - generation.cached_tokens
        steps = self.steps.generate(uncached, generation.max_tokens, generation.adapter)
        words: AsyncIterator[str] = (f" w{index}" async for index in steps)
        if self.metrics is not None:
            held = generation.prompt_tokens + generation.max_tokens
            words = self.metrics.timed(words, held)
        async for word in words:
            yield word

    def _usage(self, generation: _Generation) -> dict[str, Any]:
        return {
            "prompt_tokens": generation.prompt_tokens,
            "completion_tokens": generation.max_tokens,
            "total_tokens": generation.prompt_tokens + generation.max_tokens,
            "prompt_tokens_details": {"cached_tokens": generation.cached_tokens},
        }

    async def _chat_events(
        self, generation: _Generation, include_usage: bool
    ) -> AsyncIterator[dict[str, Any] | str]:
        head = self._header("chat.completion.chunk", generation)
        yield head | {
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}],
        }
        async for word in self._words(generation):
            yield head | {"choices": [{"index": 0, "delta": {"content": word}}]}
        yield head | {
            "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
        }
        if include_usage:
            yield head | {"choices": [], "usage": self._usage(generation)}

    async def _completion_events(
        self, generation: _Generation, include_usage: bool
    ) -> AsyncIterator[dict[str, Any] | str]:
        head = self._header("text_completion", generation)
        async for word in self._words(generation):
            yield head | {"choices": [{"index": 0, "text": word, "finish_reason": None}]}
        yield head | {"choices": [{"index": 0, "text": "", "finish_reason": "length"}]}
        if include_usage:
            yield head | {"choices": [], "usage": self._usage(generation)}

    def _header(self, kind: str, generation: _Generation) -> dict[str, Any]:
        return {
            "id": f"{'chatcmpl' if kind.startswith('chat') else 'cmpl'}-{uuid.uuid4().hex}",
            "object": kind,
            "created": int(time.time()),
            # vLLM answers with the model the request named: an adapter's id for an adapter.
            "model": generation.adapter or self.model_id,
            "system_fingerprint": self.fingerprint,
        }

    async def _chat_body(self, generation: _Generation) -> dict[str, Any]:
        words = [word async for word in self._words(generation)]
        return self._header("chat.completion", generation) | {
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "".join(words).strip()},
                    "finish_reason": "length",
                }
            ],
            "usage": self._usage(generation),
        }

    async def _completion_body(self, generation: _Generation) -> dict[str, Any]:
        words = [word async for word in self._words(generation)]
        return self._header("text_completion", generation) | {
            "choices": [{"index": 0, "text": "".join(words), "finish_reason": "length"}],
            "usage": self._usage(generation),
        }

    def _admit_chat(self, request: Any) -> _Generation:
        _one_choice(request)
        max_tokens = request.max_completion_tokens or request.max_tokens
        return self._admit(request.model, chat_prompt(request.messages), max_tokens)

    def _admit_completion(self, request: Any) -> _Generation:
        _one_choice(request)
        prompt = request.prompt
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        if not isinstance(prompt, str):
            raise SimulatedRequestError(
                "the simulated engine takes one text prompt (a string)", param="prompt"
            )
        return self._admit(request.model, prompt, request.max_tokens)

    # --- LLMEngine: what Serve's OpenAI ingress calls (the default proxy path) -------------
    # Ray declares these abstract methods without a `yield`, so mypy reads them as coroutines
    # returning generators; they are async generators (LLMServer iterates them), hence the
    # override ignores.

    async def chat(  # type: ignore[override]
        self, request: ChatCompletionRequest, raw_request_info: RawRequestInfo | None = None
    ) -> AsyncGenerator[str | ChatCompletionResponse | ErrorResponse, None]:
        try:
            generation = self._admit_chat(request)
        except SimulatedRequestError as exc:
            yield exc.response()
            return
        if request.stream:
            async for event in _sse(self._chat_events(generation, _include_usage(request))):
                yield event
        else:
            yield ChatCompletionResponse.model_validate(await self._chat_body(generation))

    async def completions(  # type: ignore[override]
        self, request: CompletionRequest, raw_request_info: RawRequestInfo | None = None
    ) -> AsyncGenerator[str | CompletionResponse | ErrorResponse, None]:
        try:
            generation = self._admit_completion(request)
        except SimulatedRequestError as exc:
            yield exc.response()
            return
        if request.stream:
            async for event in _sse(self._completion_events(generation, _include_usage(request))):
                yield event
        else:
            yield CompletionResponse.model_validate(await self._completion_body(generation))

    async def embeddings(  # type: ignore[override]
        self, request: Any, raw_request_info: RawRequestInfo | None = None
    ) -> AsyncGenerator[ErrorResponse, None]:
        yield SimulatedRequestError("the simulated engine serves no embeddings").response()

    async def transcriptions(  # type: ignore[override]
        self, request: Any, raw_request_info: RawRequestInfo | None = None
    ) -> AsyncGenerator[ErrorResponse, None]:
        yield SimulatedRequestError("the simulated engine serves no transcriptions").response()

    # --- direct streaming: the replica's own ASGI app --------------------------------------

    async def build_asgi_app(self) -> FastAPI:
        """The OpenAI routes HAProxy sends to this replica under direct streaming, with
        vLLM's conventions: 400 with an OpenAI error body for a malformed request."""
        app = FastAPI(title=f"{self.model_id} (simulated engine)")
        cards = [to_model_metadata(m, self.llm_config) for m in (self.model_id, *self.adapters)]

        @app.get("/v1/models")
        async def models() -> dict[str, Any]:
            return ModelList(data=cards).model_dump()

        @app.get("/health")
        async def health() -> dict[str, str]:
            return {"status": "ok"}

        @app.post("/v1/chat/completions")
        async def chat(raw: Request) -> Any:
            try:
                request = await _parse(raw, ChatCompletionRequest)
                generation = self._admit_chat(request)
            except SimulatedRequestError as exc:
                return _error_json(exc)
            if request.stream:
                events = self._chat_events(generation, _include_usage(request))
                return StreamingResponse(_sse(events), media_type="text/event-stream")
            return JSONResponse(await self._chat_body(generation))

        @app.post("/v1/completions")
        async def completions(raw: Request) -> Any:
            try:
                request = await _parse(raw, CompletionRequest)
                generation = self._admit_completion(request)
            except SimulatedRequestError as exc:
                return _error_json(exc)
            if request.stream:
                events = self._completion_events(generation, _include_usage(request))
                return StreamingResponse(_sse(events), media_type="text/event-stream")
            return JSONResponse(await self._completion_body(generation))

        return app


def _one_choice(request: Any) -> None:
    if (getattr(request, "n", 1) or 1) != 1:
        raise SimulatedRequestError("the simulated engine generates one choice (n=1)", param="n")


def _include_usage(request: Any) -> bool:
    options = getattr(request, "stream_options", None)
    return bool(options is not None and options.include_usage)


async def _sse(events: AsyncIterator[dict[str, Any] | str]) -> AsyncIterator[str]:
    async for event in events:
        yield f"data: {json.dumps(event, separators=(',', ':'))}\n\n"
    yield "data: [DONE]\n\n"


async def _parse(raw: Request, model: Any) -> Any:
    try:
        body = json.loads(await raw.body())
    except ValueError as exc:
        raise SimulatedRequestError(f"the request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise SimulatedRequestError("the request body must be a JSON object")
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        message = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or 'body'}: {error['msg']}"
            for error in exc.errors()
        )
        raise SimulatedRequestError(message, param=where or None) from None


def _error_json(exc: SimulatedRequestError) -> JSONResponse:
    return JSONResponse(exc.response().model_dump(), status_code=exc.code)
