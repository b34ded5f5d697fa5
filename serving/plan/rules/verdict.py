"""What a rule is and what it says: a `Verdict` on one layout, naming the profile field it is
about, and a `Rule` (code, severity, field, meaning and the function that judges a `Case`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from pydantic import Field

from serving.frozen import Frozen
from serving.plan.memory import MemoryBreakdown
from serving.plan.replicas import Role
from serving.plan.rules.layouts import describe, smallest_layout
from serving.spec.parts import Parallelism
from serving.spec.profile import ModelSpec

Severity = Literal["error", "warning"]


class Verdict(Frozen):
    code: str = Field(description="Stable identifier, e.g. 'tp-crosses-node'.")
    severity: Severity = Field(
        description="error: cannot work; warning: works but wastes or misleads."
    )
    field: str = Field(
        description="The profile field the verdict is about, where its fix goes, e.g. "
        "'parallelism.tensor'."
    )
    role: Role
    message: str
    suggestion: Parallelism | None = Field(
        default=None, description="The smallest layout that would work, where one exists."
    )


@dataclass(frozen=True)
class Case:
    """One layout under judgement, with what several rules ask of it worked out once."""

    spec: ModelSpec
    role: Role
    layout: Parallelism
    mem: MemoryBreakdown
    per_node: int  # GPUs of one worker pod (one node)
    strategy: str | None  # the Ray placement strategy asked for, None where the compiler chooses

    @cached_property
    def smallest(self) -> Parallelism | None:
        return smallest_layout(self.spec, self.layout)

    @property
    def use(self) -> str:
        """The fix most rules end on: the smallest layout, or that none holds the model."""
        if self.smallest is not None:
            return f"use {describe(self.smallest)}"
        return f"no layout on {self.spec.gpu.key} nodes holds it"


@dataclass(frozen=True)
class Finding:
    """What a rule found wrong: the message, and the layout that would work, where one does."""

    message: str
    suggestion: Parallelism | None = None


@dataclass(frozen=True)
class Rule:
    """One rule: `judge` returns a finding where the case breaks it, None where it passes."""

    code: str
    severity: Severity
    field: str  # the profile field its fix goes in
    meaning: str  # what breaking it means, for the verdicts reference page
    judge: Callable[[Case], Finding | None]

    def verdict(self, case: Case) -> Verdict | None:
        found = self.judge(case)
        if found is None:
            return None
        return Verdict(
            code=self.code, severity=self.severity, field=self.field, role=case.role,
            message=found.message, suggestion=found.suggestion,
        )  # fmt: skip
