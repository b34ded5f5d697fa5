"""Compiling a spec in tests as the pipeline does: planned once, compiled once."""

from __future__ import annotations

from infra.disruption import Resilience
from infra.manifests import compile_for
from serving.compiler import CompiledModel, compile
from serving.planner import plan
from serving.spec import ModelSpec


def compile_spec(spec: ModelSpec, *, graceful_shutdown_s: int | None = None) -> CompiledModel:
    """The spec planned and compiled."""
    return compile(spec, plan(spec), graceful_shutdown_s=graceful_shutdown_s)


def deployable(spec: ModelSpec, resilience: Resilience | None = None) -> CompiledModel:
    """The spec planned and compiled for nodes with this resilience, as the platform does."""
    return compile_for(spec, plan(spec), resilience or Resilience())
