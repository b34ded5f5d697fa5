"""What a serving pattern is: Ray's public builder for it, the specs it serves, how it lays out
the builder's arguments from the plan, and how to find its LLMConfigs in those arguments again
(policies and the local runtime read a compiled application that way)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from serving.plan.planner import Plan
from serving.plan.replicas import Role
from serving.spec.profile import ModelSpec

BuilderArgs = Callable[[ModelSpec, Plan, int | None], dict[str, Any]]
LlmConfigsOf = Callable[[Mapping[str, Any]], list[tuple[Role, dict[str, Any]]]]


@dataclass(frozen=True)
class Pattern:
    name: str
    import_path: str
    """Ray's builder, `module:function`, as the Serve config's `import_path`."""
    serves: Callable[[ModelSpec], bool]
    """Whether a spec is served this way; exactly one pattern serves each spec."""
    builder_args: BuilderArgs
    """The builder's `args` for a spec and its plan (and the graceful shutdown, if known)."""
    llm_configs: LlmConfigsOf
    """(role, LLMConfig) for each LLMConfig this pattern's args hold; the dicts are the args'
    own."""
