"""Reading user files into typed models, turning every failure into a `ServestackError`.

Stack config (infra) and model profiles (serving) both come through here, so a bad key, a wrong
type or an impossible value reads the same wherever it was made: file, field, problem, fix.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from serving.errors import (
    FixableValueError,
    ProfileValidationError,
    ServestackError,
    unknown_key_fix,
)
from serving.spec.profile import ModelSpec

M = TypeVar("M", bound=BaseModel)


def display_path(path: Path) -> str:
    """The path as the user would type it: relative to the working directory when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


# A profile or a stack file is a page of settings (the shipped ones are under 2 KB); a file far
# larger is a mistake or an attack, and everything in a profile reaches the RayService, which the
# Kubernetes API stores only up to its object size limit.
MAX_FILE_BYTES = 64 * 1024
# Settings nest a few levels (engine_args.hf_overrides.rope_scaling); far deeper is an attack.
MAX_NESTING = 32


class _StrictLoader(yaml.SafeLoader):
    """YAML as a settings file needs it: no aliases (a few bytes of anchors can expand into
    megabytes), no key written twice (the second would silently win), and floats as YAML 1.2
    reads them (`8.0e9`, which YAML 1.1 reads as a string)."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event: Any = self.peek_event()  # type: ignore[no-untyped-call]
        if self.check_event(yaml.AliasEvent):
            raise yaml.constructor.ConstructorError(
                None, None, f"alias *{event.anchor} is not allowed here", event.start_mark
            )
        # PyYAML composes recursively: thousands of nested brackets would end in a
        # RecursionError deep inside it instead of a message.
        if self._depth >= MAX_NESTING:
            raise yaml.constructor.ConstructorError(
                None, None, f"values are nested more than {MAX_NESTING} levels deep",
                event.start_mark,
            )  # fmt: skip
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, list | dict):
                continue  # unhashable: SafeLoader refuses it with its own message
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is written twice", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def load_yaml_text(text: str) -> Any:
    """Parse settings YAML with the rules above; raises `yaml.YAMLError`."""
    return yaml.load(text, Loader=_StrictLoader)


def read_text(path: Path, limit: int = MAX_FILE_BYTES) -> str:
    """A user's file as UTF-8 text, or a `ServestackError` naming the file and what is wrong."""
    source = display_path(path)
    try:
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    except FileNotFoundError:
        raise ServestackError(source, "", "no such file", "check the path and the name") from None
    except IsADirectoryError:
        raise ServestackError(source, "", "is a directory, not a file", "name a file") from None
    except OSError as exc:
        raise ServestackError(
            source, "", f"cannot be read ({exc.strerror})", "check the file's permissions"
        ) from None
    if len(data) > limit:
        raise ServestackError(
            source, "", f"is larger than {limit // 1024} KiB",
            "a profile or stack file is a page of settings; remove what does not belong in it",
        )  # fmt: skip
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ServestackError(
            source, f"line {line}",
            f"is not UTF-8: byte 0x{data[exc.start]:02x} at byte offset {exc.start}",
            "save the file as UTF-8 (e.g. `iconv -f latin1 -t utf-8`), or remove that byte",
        ) from None  # fmt: skip


def read_yaml(path: Path) -> Any:
    source = display_path(path)
    text = read_text(path)
    try:
        return load_yaml_text(text)
    except yaml.YAMLError as exc:
        # An unclosed bracket is noticed a line late: the context mark shows where it opened.
        mark = getattr(exc, "context_mark", None) or getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else ""
        problem = str(getattr(exc, "problem", None) or exc)
        fix = "fix the YAML syntax at that line"
        if "alias" in problem:
            fix = "write the value out in full where it is used (anchors and aliases are refused)"
        elif "nested more than" in problem:
            fix = "flatten the value; profiles and stacks nest a few levels, not dozens"
        elif "written twice" in problem:
            fix = "keep one of the two; a key written twice would silently drop the first"
        raise ServestackError(source, where, f"not valid YAML: {problem}", fix) from None


def _model_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The pydantic model that owns the field at `loc` (for listing its allowed keys)."""
    current: type[BaseModel] | None = model
    for part in loc:
        if current is None or not isinstance(part, str) or part not in current.model_fields:
            return current if isinstance(part, int) else None
        annotation = current.model_fields[part].annotation
        candidates = getattr(annotation, "__args__", (annotation,))
        current = next(
            (c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None
        )
    return current


def _describe_field(model: type[BaseModel], loc: tuple[int | str, ...]) -> str | None:
    if not loc or not isinstance(loc[-1], str):
        return None
    owner = _model_at(model, loc[:-1])
    if owner is None or loc[-1] not in owner.model_fields:
        return None
    return owner.model_fields[loc[-1]].description


def _convert(
    model: type[BaseModel], source: str, error: ErrorDetails, key_prefix: str
) -> ServestackError:
    # Model-level validators report no location; their FixableValueError names the field.
    loc = tuple(p for p in error["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    field = key_prefix + ".".join(str(p) for p in loc)
    # A top-level key is spelled with its prefix in the file (`servestack:models`).
    spelled = f"{key_prefix}{loc[-1]}" if len(loc) == 1 else str(loc[-1]) if loc else ""
    kind = error["type"]
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, FixableValueError):
        if cause.field:
            field = f"{field}.{cause.field}" if loc else key_prefix + cause.field
        return ServestackError(source, field, cause.problem, cause.fix)
    if kind == "extra_forbidden":
        owner = _model_at(model, loc[:-1])
        allowed = list(owner.model_fields) if owner else []
        if len(loc) == 1:
            allowed = [key_prefix + key for key in allowed]
        return ServestackError(
            source, field, f"unknown key '{spelled}'", unknown_key_fix(spelled, allowed, "keys")
        )
    description = _describe_field(model, loc)
    hint = f" ({description})" if description else ""
    if kind == "missing":
        return ServestackError(source, field, "is required", f"add '{spelled}'{hint}")
    got = error.get("input")
    shown = repr(got) if not isinstance(got, dict) else "a mapping"
    return ServestackError(
        source, field, f"{error['msg']}, got {shown}", f"set a valid value{hint}"
    )


def validate(model: type[M], data: Any, source: str, key_prefix: str = "") -> M:
    """Validate `data` into `model`, or raise every problem at once as a `ServestackError`.

    `key_prefix` is how the file spells top-level keys (a stack file's `servestack:`)."""
    if not isinstance(data, dict):
        raise ServestackError(
            source, "", "expected a mapping of keys to values", "see the README for the format"
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = [_convert(model, source, e, key_prefix) for e in exc.errors()]
        raise ProfileValidationError(problems) from None


def load_profile(path: Path) -> ModelSpec:
    """Parse one model profile YAML file."""
    return validate(ModelSpec, read_yaml(path), display_path(path))
