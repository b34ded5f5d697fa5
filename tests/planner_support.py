"""Builders for the planner tests: a spec from profile fields over a small default, and the verdict
codes of a plan."""

from __future__ import annotations

from typing import Any

from serving.spec.profile import ModelSpec


def spec(**fields: Any) -> ModelSpec:
    base: dict[str, Any] = {
        "name": "m",
        "source": "org/model",
        "architecture": "llama-3.1-8b",
        "accelerator": "h100-80gb",
        "max_model_len": 8192,
    }
    return ModelSpec.model_validate(base | fields)


def codes(model_plan: Any) -> set[str]:
    return {v.code for v in model_plan.verdicts}
