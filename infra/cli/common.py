"""What every `servestack` command shares: the consoles, the common options and the checks of
command-line values, each failing with the usual clear error."""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from serving.catalog import ARCHITECTURES
from serving.errors import ServestackError, unknown_key_fix
from serving.local.runtime.app import ENGINES, Engine
from serving.recommend.ranking import catalog_spec
from serving.spec.loading import display_path
from serving.spec.profile import ModelSpec

# Piped output (CI logs, files) has no terminal width to follow; rich would assume 80 columns
# and fold the plan's table.
PIPED_WIDTH = 110
console = Console() if sys.stdout.isatty() else Console(width=PIPED_WIDTH)
errors = Console(stderr=True, soft_wrap=True)

StackArg = Annotated[str, typer.Argument(help="Stack name: stacks/Pulumi.<STACK>.yaml.")]
LocalFlag = Annotated[
    bool,
    typer.Option(
        "--local", help="Run on this machine's CPU: real Ray Serve and HAProxy, simulated engine."
    ),
]
EngineOption = Annotated[
    str,
    typer.Option(
        help="simulated: the simulation timed from the model's plan; vllm: vLLM 0.22's CPU build "
        "serving a tiny model of the profile's family."
    ),
]
TimeScaleOption = Annotated[
    float,
    typer.Option(help="Multiplies the simulated engine's plan-derived prefill and decode times."),
]


def choose_engine(name: str) -> Engine:
    for engine in ENGINES:
        if engine == name:
            return engine
    raise ServestackError(
        "command line", "--engine", f"no engine '{name}'",
        unknown_key_fix(name, ENGINES, "engines"),
    )  # fmt: skip


def require_local(local: bool, command: str) -> None:
    if not local:
        raise ServestackError(
            "command line", "--local",
            f"`servestack {command}` runs the local CPU data plane only; a cluster is served by "
            "`pulumi up`",
            f"servestack local {command} (or add --local: servestack {command} --local)",
        )  # fmt: skip


def local_form(command: Callable[..., None], **fixed: Any) -> Callable[..., None]:
    """`command` as the `servestack local` group runs it: the parameters in `fixed` (its
    `--local` flag, say) are set, and gone from its options."""
    signature = inspect.signature(command, eval_str=True)

    @functools.wraps(command)
    def local_command(**options: Any) -> None:
        command(**options, **fixed)

    local_command.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[p for p in signature.parameters.values() if p.name not in fixed]
    )
    return local_command


def local_modules() -> tuple[Any, Any]:
    """serving.local's Ray-side modules, or an error naming the missing extra."""
    try:
        import ray.serve  # noqa: F401

        from serving.local.engine import simulation
        from serving.local.runtime import local_ray as runtime
    except ImportError as exc:
        raise ServestackError(
            "environment", "ray", f"the local data plane needs Ray Serve LLM ({exc})",
            "pip install 'servestack[local]'",
        ) from None  # fmt: skip
    return runtime, simulation


def one_model(profiles: dict[str, ModelSpec], name: str | None, source: Path) -> ModelSpec:
    if name:
        return pick(profiles, name, source, "--model")
    if len(profiles) == 1:
        return next(iter(profiles.values()))
    raise ServestackError(
        display_path(source), "--model",
        f"the stack serves {len(profiles)} models and a local run takes one",
        f"add --model with one of: {', '.join(sorted(profiles))}",
    )  # fmt: skip


def positive(value: float, flag: str, *, allow_zero: bool = False) -> None:
    if value < 0 or (value == 0 and not allow_zero):
        raise ServestackError(
            "command line", flag, f"{value:g} is not allowed here",
            "use a positive number" if not allow_zero else "use zero or a positive number",
        )  # fmt: skip


def free_port(port: int) -> None:
    import socket

    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            raise ServestackError(
                "command line", "--port", f"port {port} is in use on this machine",
                "pick a free one, e.g. --port 8001",
            ) from None  # fmt: skip


def pick(
    profiles: dict[str, ModelSpec], name: str, source: Path, flag: str, *, catalog: bool = False
) -> ModelSpec:
    if name in profiles:
        return profiles[name]
    for spec in profiles.values():
        if spec.name == name:
            return spec
    if catalog and name in ARCHITECTURES:
        return catalog_spec(name)
    known = sorted({*profiles, *(ARCHITECTURES if catalog else ())})
    what = "stack models and catalog architectures" if catalog else "stack models"
    raise ServestackError(
        display_path(source), flag, f"the stack has no model '{name}'",
        unknown_key_fix(name, known, what),
    )  # fmt: skip


def positive_ms(value: float, flag: str) -> float:
    if value <= 0:
        raise ServestackError(
            "command line", flag, f"{value:g} ms is not a latency target",
            "use a positive number of milliseconds, e.g. 50",
        )  # fmt: skip
    return value / 1e3
