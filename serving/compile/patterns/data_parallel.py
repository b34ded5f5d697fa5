"""MoE data + expert parallelism, built by Ray's `build_dp_openai_app`: one LLMConfig whose
engine runs `data_parallel_size` ranks (expert parallel across them, EP = DP x TP). Ray counts
DP groups in `num_replicas` and places each rank as its own replica."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from serving.compile.llm_config import llm_config
from serving.compile.patterns.pattern import Pattern
from serving.plan.planner import Plan
from serving.plan.replicas import Role
from serving.spec.profile import ModelSpec

BUILD_DP_OPENAI_APP = "ray.serve.llm:build_dp_openai_app"


def serves(spec: ModelSpec) -> bool:
    return spec.disaggregation is None and spec.parallelism.data > 1


def builder_args(
    spec: ModelSpec, model_plan: Plan, graceful_shutdown_s: int | None
) -> dict[str, Any]:
    server = model_plan.group("server")
    return {"llm_config": llm_config(spec, server, graceful_shutdown_s=graceful_shutdown_s)}


def llm_configs(args: Mapping[str, Any]) -> list[tuple[Role, dict[str, Any]]]:
    return [("server", args["llm_config"])] if "llm_config" in args else []


PATTERN = Pattern("data_parallel", BUILD_DP_OPENAI_APP, serves, builder_args, llm_configs)
