"""A RayService's compiled Serve config, parsed once per text: its LLM deployments (the server,
or each side of a P/D pair) with the layout each runs, as the engine arguments and placement
group say, not as the profile asked."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import yaml
from pydantic import ValidationError

from policies.views.base import UnreadableError, as_number, remembers
from serving.compile.patterns import llm_configs_of
from serving.spec.parts import Parallelism

SERVE_CONFIG = "spec.serveConfigV2"
# Ray's own default when none is given (PACK since ray#56980).
RAY_DEFAULT_STRATEGY = "PACK"
# Ray Serve's graceful_shutdown_timeout_s when the deployment sets none.
SERVE_DEFAULT_SHUTDOWN_S = 20.0


@dataclass(frozen=True)
class Deployment:
    """One LLMConfig of a RayService. `config` is the parsed config's own dict: read it, never
    change it (every policy of the run shares it)."""

    index: int
    role: str
    config: Mapping[str, Any]
    layout: Parallelism
    strategy: str
    shutdown_s: float  # Serve's graceful_shutdown_timeout_s for a stopping replica

    @property
    def engine(self) -> Mapping[str, Any]:
        engine: Mapping[str, Any] = self.config.get("engine_kwargs") or {}
        return engine

    @property
    def router_class(self) -> str | None:
        deployment = self.config.get("deployment_config") or {}
        router = deployment.get("request_router_config") or {}
        value = router.get("request_router_class")
        return str(value) if value else None

    @property
    def accelerator_type(self) -> Any:
        return self.config.get("accelerator_type")


@remembers
@lru_cache(maxsize=256)
def _document(text: str) -> Mapping[str, Any]:
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UnreadableError("", SERVE_CONFIG, f"is not YAML ({exc.__class__.__name__})") from None
    if not isinstance(document, Mapping):
        raise UnreadableError("", SERVE_CONFIG, "is not a YAML object")
    return document


def _layout(engine: Mapping[str, Any], role: str) -> Parallelism:
    sizes = {
        "tensor": "tensor_parallel_size",
        "pipeline": "pipeline_parallel_size",
        "data": "data_parallel_size",
    }
    try:
        return Parallelism(
            **{
                part: int(as_number(engine.get(key, 1), "", f"{role} engine_kwargs.{key}"))
                for part, key in sizes.items()
            },
            expert=bool(engine.get("enable_expert_parallel", False)),
        )
    except ValidationError as exc:
        problem = exc.errors()[0]
        raise UnreadableError(
            "", f"{role} engine_kwargs.{sizes.get(str(problem['loc'][0]), '')}", problem["msg"]
        ) from None


@remembers
@lru_cache(maxsize=256)
def _deployments(text: str) -> tuple[Deployment, ...]:
    found: list[Deployment] = []
    for app in _document(text).get("applications") or []:
        for role, config in llm_configs_of((app or {}).get("args") or {}):
            engine = config.get("engine_kwargs") or {}
            placement = config.get("placement_group_config") or {}
            strategy = str(placement.get("strategy", RAY_DEFAULT_STRATEGY))
            serve = config.get("deployment_config") or {}
            shutdown = as_number(
                serve.get("graceful_shutdown_timeout_s", SERVE_DEFAULT_SHUTDOWN_S),
                "",
                f"{role} deployment_config.graceful_shutdown_timeout_s",
            )
            layout = _layout(engine, role)
            found.append(Deployment(len(found), role, config, layout, strategy, shutdown))
    if not found:
        raise UnreadableError("", "serveConfigV2", "holds no LLM config")
    return tuple(found)


def _named(resource: str, exc: UnreadableError) -> UnreadableError:
    return UnreadableError(resource, exc.field, exc.problem)


def document(resource: str, text: str) -> Mapping[str, Any]:
    """The Serve config as YAML holds it."""
    try:
        return _document(text)
    except UnreadableError as exc:
        raise _named(resource, exc) from None


def deployments(resource: str, text: str) -> tuple[Deployment, ...]:
    """Each LLM deployment the Serve config runs, in order."""
    try:
        return _deployments(text)
    except UnreadableError as exc:
        raise _named(resource, exc) from None
