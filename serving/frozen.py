"""The base of servestack's frozen pydantic types: once built, a value never changes, and a key
the type does not declare is refused rather than ignored."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    """Immutable, and no unknown keys."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class StrictFrozen(Frozen):
    """For what people write (profiles, stack config, catalog entries). Strict: YAML's `true` is
    no tensor size and "8" no count, so a file says what it means. No .inf or .nan either: no
    estimate can be made from them."""

    model_config = ConfigDict(strict=True, allow_inf_nan=False)
