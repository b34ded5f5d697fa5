"""Where a running local data plane can be scraped, for whoever wants to look at it.

Each local run (`servestack serve --local`, every configuration `servestack bench --local`
starts) writes one small file naming its model, its OpenAI endpoint and its metrics endpoints
(Ray's metrics export, which carries Serve's and the engine's metrics, and Ray Serve's HAProxy
exporter), and removes it when it stops. `servestack top --local` and the metric-existence test
find runs there; a file whose process is gone is ignored.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

REGISTRY_DIR = Path(tempfile.gettempdir()) / "servestack-local"


@dataclass(frozen=True)
class ObservedRun:
    pid: int
    model: str
    endpoint: str
    metrics: dict[str, str]  # exporter ("ray", "haproxy") -> scrape URL


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def registered(run: ObservedRun, directory: Path = REGISTRY_DIR) -> Iterator[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{run.pid}-{run.model}.json"
    path.write_text(json.dumps(asdict(run)))
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


def running(directory: Path = REGISTRY_DIR) -> list[ObservedRun]:
    """The local runs alive now, oldest first."""
    found = []
    for path in sorted(directory.glob("*.json"), key=lambda p: p.stat().st_mtime):
        with contextlib.suppress(OSError, ValueError, TypeError):
            run = ObservedRun(**json.loads(path.read_text()))
            if _alive(run.pid):
                found.append(run)
    return found
