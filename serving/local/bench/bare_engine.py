"""The simulated engine behind a bare HTTP server, no Ray: the floor the serving paths are held
against in the capacity sweep (`serving.local.bench.capacity`).

It is the same engine object and the same ASGI app that a replica serves under direct streaming
(`SimulatedEngine.build_asgi_app`), run by uvicorn alone on one port: whatever Ray Serve's paths
cost above it is theirs.

    python -m serving.local.bench.bare_engine MODEL PORT   # settings in SERVESTACK_SIMULATION
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from serving.local.bench.runner import VariantStartError
from serving.local.engine.simulation import SimulationSettings
from serving.local.runtime import cleanup
from serving.local.runtime.ports import held_ports
from serving.paths import CODE_ROOT

READY_TIMEOUT_S = 120.0


class BareStartError(VariantStartError):
    """The bare server did not come up; the message has its log's last lines."""


async def _serve(model: str, port: int) -> None:
    import uvicorn
    from ray.llm._internal.serve.core.configs.llm_config import LLMConfig

    from serving.local.engine.simulated import SimulatedEngine

    # No Ray, so no metrics to export: the replicas' engines record theirs (a few counters per
    # request), this one does not.
    config = LLMConfig(model_loading_config={"model_id": model}, log_engine_metrics=False)
    engine = SimulatedEngine(config)
    await engine.start()
    app = await engine.build_asgi_app()
    server = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    await uvicorn.Server(server).serve()


@contextlib.contextmanager
def running_bare_engine(model: str, settings: SimulationSettings, log_path: Path) -> Iterator[str]:
    """Start the bare server; yield its endpoint; stop it."""
    import os

    with held_ports(1) as (port,):
        env = os.environ | settings.to_env() | {"PYTHONPATH": str(CODE_ROOT)}
        command = [sys.executable, "-m", "serving.local.bench.bare_engine", model, str(port)]
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with (
            log_path.open("w") as log,
            cleanup.supervised(command, env=env, stdout=log, stderr=subprocess.STDOUT) as child,
        ):
            endpoint = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + READY_TIMEOUT_S
            while child.process.poll() is None and time.monotonic() < deadline:
                with (
                    contextlib.suppress(urllib.error.URLError, OSError),
                    urllib.request.urlopen(f"{endpoint}/v1/models", timeout=5),
                ):
                    break
                time.sleep(0.5)
            else:
                tail = log_path.read_text(errors="replace").strip().splitlines()[-5:]
                raise BareStartError(f"the bare server did not start; {log_path}: {tail}")
            yield endpoint


if __name__ == "__main__":
    asyncio.run(_serve(sys.argv[1], int(sys.argv[2])))
