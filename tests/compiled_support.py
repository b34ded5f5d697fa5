"""Specs for tests, and compiling them as the pipeline does: planned once, compiled once."""

from __future__ import annotations

from typing import Any

from repo import REPO

from infra.kube.disruption import Resilience
from infra.kube.manifests import compile_for
from infra.kube.model_objects import ModelObjects, StackFacts, build_model_objects
from serving.compile.compiler import CompiledModel, compile
from serving.plan.planner import plan
from serving.spec.loading import validate
from serving.spec.profile import ModelSpec

# The dev stack's model on one H100 with a short context: what most unit tests start from.
LLAMA_8B: dict[str, Any] = {
    "name": "llama-3.1-8b",
    "source": "meta-llama/Llama-3.1-8B-Instruct",
    "architecture": "llama-3.1-8b",
    "accelerator": "h100-80gb",
    "max_model_len": 8192,
}


def llama_8b(**changes: Any) -> ModelSpec:
    """LLAMA_8B with these profile fields changed, validated as a profile file would be."""
    return validate(ModelSpec, {**LLAMA_8B, **changes}, "test profile")


def compile_spec(spec: ModelSpec, *, graceful_shutdown_s: int | None = None) -> CompiledModel:
    """The spec planned and compiled."""
    return compile(spec, plan(spec), graceful_shutdown_s=graceful_shutdown_s)


def deployable(spec: ModelSpec, resilience: Resilience | None = None) -> CompiledModel:
    """The spec planned and compiled for nodes with this resilience, as the platform does."""
    return compile_for(spec, plan(spec), resilience or Resilience())


def model_objects_of(spec: ModelSpec, *, hf_token: bool = False) -> ModelObjects:
    """The spec's Kubernetes objects, as a stack with this image and no edge host builds them."""
    facts = StackFacts(
        image="rayproject/ray-llm:2.56.1-py311-cu128",
        host=None,
        requests_per_second=20,
        stream_timeout_s=600,
        hf_token=hf_token,
        operator_namespace="kuberay-system",
    )
    return build_model_objects(deployable(spec), facts, "test profile")


# Every profile the repository ships.
SHIPPED_PROFILES = sorted((REPO / "stacks" / "models").glob("*.yaml"))


def llm_configs(spec: ModelSpec) -> list[tuple[str, dict[str, Any]]]:
    """(role, LLMConfig arguments) for each replica group the plan holds, from one compile."""
    compiled = compile_spec(spec)
    return [(group.role, compiled.llm_config(group.role)) for group in compiled.plan.groups]
