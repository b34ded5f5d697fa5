"""Errors a user can meet: what was wrong, where (file and field) and what would work."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class FixableValueError(ValueError):
    """A validation failure that knows its fix; pydantic keeps it as the error's context."""

    def __init__(self, problem: str, fix: str, field: str | None = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.fix = fix
        self.field = field


class ServestackError(Exception):
    """Bad input from a user: printed without a traceback, exit code 2."""

    exit_code = 2

    def __init__(self, source: str, field: str, problem: str, fix: str) -> None:
        self.source = source
        self.field = field
        self.problem = problem
        self.fix = fix
        super().__init__(self.render())

    def render(self) -> str:
        where = f"{self.source}: {self.field}" if self.field else self.source
        return f"{where}: {self.problem}\n  fix: {self.fix}"


class ProfileValidationError(ServestackError):
    """Several problems in one input file, reported together so one edit fixes them all."""

    def __init__(self, errors: list[ServestackError]) -> None:
        self.errors = errors
        first = errors[0]
        super().__init__(first.source, first.field, first.problem, first.fix)

    def render(self) -> str:
        return "\n".join(error.render() for error in self.errors)


def nearest(word: str, choices: Iterable[str]) -> str | None:
    """The closest known spelling, for 'did you mean' hints."""
    matches = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.5)
    return matches[0] if matches else None


def unknown_key_fix(word: str, choices: Iterable[str], what: str) -> str:
    options = sorted(choices)
    guess = nearest(word, options)
    listing = ", ".join(options)
    if guess:
        return f"did you mean '{guess}'? known {what}: {listing}"
    return f"use one of the known {what}: {listing}"
