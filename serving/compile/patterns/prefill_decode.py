"""Prefill/decode disaggregation, built by Ray's `build_pd_openai_app`: a prefill and a decode
LLMConfig, one per replica group of the plan, each side's engine given the KV connector that
moves a prompt's KV cache from the prefill replica to the decode replica."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from serving.compile.llm_config import llm_config
from serving.compile.patterns.pattern import Pattern
from serving.plan.planner import Plan
from serving.plan.replicas import Role
from serving.spec.profile import ModelSpec

BUILD_PD_OPENAI_APP = "ray.serve.llm:build_pd_openai_app"
SIDES: tuple[Role, ...] = ("prefill", "decode")


def serves(spec: ModelSpec) -> bool:
    return spec.disaggregation is not None


def kv_transfer(spec: ModelSpec) -> dict[str, Any]:
    """The engine arguments each side adds: both send and receive KV blocks through the
    profile's connector. A fresh dict per side, so no two LLMConfigs share one object."""
    assert spec.disaggregation is not None
    connector = spec.disaggregation.kv_connector
    return {"kv_transfer_config": {"kv_connector": connector, "kv_role": "kv_both"}}


def builder_args(
    spec: ModelSpec, model_plan: Plan, graceful_shutdown_s: int | None
) -> dict[str, Any]:
    return {
        f"{side}_config": llm_config(
            spec,
            model_plan.group(side),
            pattern_kwargs=kv_transfer(spec),
            graceful_shutdown_s=graceful_shutdown_s,
        )
        for side in SIDES
    }


def llm_configs(args: Mapping[str, Any]) -> list[tuple[Role, dict[str, Any]]]:
    return [(side, args[f"{side}_config"]) for side in SIDES if f"{side}_config" in args]


PATTERN = Pattern("prefill_decode", BUILD_PD_OPENAI_APP, serves, builder_args, llm_configs)
