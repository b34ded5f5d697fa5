"""The serving patterns, one module each, as Ray's own `serving_patterns/` are: `single`
(`build_openai_app`), `data_parallel` (`build_dp_openai_app`) and `prefill_decode`
(`build_pd_openai_app`). Each builds its application's args with Ray's public builder named as
an import path; nothing else branches on which pattern a spec takes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from serving.compile.patterns import data_parallel, prefill_decode, single
from serving.compile.patterns.pattern import Pattern
from serving.plan.replicas import Role
from serving.spec.profile import ModelSpec

BUILD_OPENAI_APP = single.BUILD_OPENAI_APP
BUILD_DP_OPENAI_APP = data_parallel.BUILD_DP_OPENAI_APP
BUILD_PD_OPENAI_APP = prefill_decode.BUILD_PD_OPENAI_APP
PATTERNS: tuple[Pattern, ...] = (single.PATTERN, data_parallel.PATTERN, prefill_decode.PATTERN)

__all__ = [
    "BUILD_DP_OPENAI_APP",
    "BUILD_OPENAI_APP",
    "BUILD_PD_OPENAI_APP",
    "PATTERNS",
    "Pattern",
    "builder",
    "llm_configs_of",
    "pattern_for",
]


def pattern_for(spec: ModelSpec) -> Pattern:
    """The one pattern that serves the spec: P/D pairs, DP+EP groups, or one LLM deployment."""
    (found,) = [pattern for pattern in PATTERNS if pattern.serves(spec)]
    return found


def builder(spec: ModelSpec) -> str:
    """Ray's builder for the spec, as an import path."""
    return pattern_for(spec).import_path


def llm_configs_of(args: Mapping[str, Any]) -> list[tuple[Role, dict[str, Any]]]:
    """(role, LLMConfig) for each LLMConfig in an application's builder args, as the patterns
    lay them out; the dicts are the args' own."""
    return [found for pattern in PATTERNS for found in pattern.llm_configs(args)]
