"""One LLM deployment per model (dense models; tensor and pipeline parallelism), built by Ray's
`build_openai_app`: its args hold a list of LLMConfigs, here exactly one (direct streaming serves
one model per application)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from serving.compile.llm_config import llm_config
from serving.compile.patterns.pattern import Pattern
from serving.plan.planner import Plan
from serving.plan.replicas import Role
from serving.spec.profile import ModelSpec

BUILD_OPENAI_APP = "ray.serve.llm:build_openai_app"


def serves(spec: ModelSpec) -> bool:
    return spec.disaggregation is None and spec.parallelism.data == 1


def builder_args(
    spec: ModelSpec, model_plan: Plan, graceful_shutdown_s: int | None
) -> dict[str, Any]:
    server = model_plan.group("server")
    return {"llm_configs": [llm_config(spec, server, graceful_shutdown_s=graceful_shutdown_s)]}


def llm_configs(args: Mapping[str, Any]) -> list[tuple[Role, dict[str, Any]]]:
    return [("server", config) for config in args.get("llm_configs") or []]


PATTERN = Pattern("single", BUILD_OPENAI_APP, serves, builder_args, llm_configs)
