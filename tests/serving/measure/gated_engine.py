"""The simulated engine's own app under uvicorn, as `serving.local.bench.bare_engine` serves it
(no Ray), behind what a deployed edge adds: a bearer-key check (401 without the key) and a count
of the chat requests it answered, read at GET /served (no key needed).

    python gated_engine.py MODEL PORT KEY   # the engine's settings in SERVESTACK_SIMULATION
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any


async def serve(model: str, port: int, key: str) -> None:
    import uvicorn
    from fastapi.responses import JSONResponse
    from ray.llm._internal.serve.core.configs.llm_config import LLMConfig

    from serving.local.engine.simulated import SimulatedEngine

    config = LLMConfig(model_loading_config={"model_id": model}, log_engine_metrics=False)
    engine = SimulatedEngine(config)
    await engine.start()
    app = await engine.build_asgi_app()
    served = {"answered": 0, "refused": 0}

    @app.middleware("http")
    async def gate(request: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        if request.url.path == "/served":
            return JSONResponse(served)
        if request.headers.get("authorization") != f"Bearer {key}":
            served["refused"] += 1
            return JSONResponse({"error": "no valid key"}, status_code=401)
        response = await call_next(request)
        if request.url.path == "/v1/chat/completions" and response.status_code == 200:
            served["answered"] += 1
        return response

    server = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    await uvicorn.Server(server).serve()


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1], int(sys.argv[2]), sys.argv[3]))
