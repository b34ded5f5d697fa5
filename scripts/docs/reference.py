"""The reference pages' tables: the profile's fields and the stack's keys (from the pydantic
models' `Field(description=...)`), the CLI (from the Typer app), the policy pack, the
planner's verdicts (from its rules' registry) and the fast-path switches. Each fact is imported
once, by name, where its maker reads it."""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
from collections import deque
from datetime import datetime
from ipaddress import IPv4Network
from typing import Any, Literal

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from scripts.docs.regions import Maker, anywhere

_SCALARS = {int: "integer", float: "number", bool: "boolean", str: "text", IPv4Network: "CIDR",
            datetime: "RFC 3339 time", typing.Any: "any"}  # fmt: skip
_BOUNDS = ((annotated_types.Ge, "≥", "ge"), (annotated_types.Gt, ">", "gt"),
           (annotated_types.Le, "≤", "le"), (annotated_types.Lt, "<", "lt"),
           (annotated_types.MinLen, "at least", "min_length"))  # fmt: skip


def cell(text: str) -> str:
    """Text safe inside a Markdown table cell (no pipes, no raw HTML)."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace("\n", " ")


def slug(heading: str) -> str:
    """The anchor mkdocs and GitHub both give a heading of plain words, dots and dashes."""
    return re.sub(r"[^a-z0-9 _-]", "", heading.lower()).replace(" ", "-")


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _type_text(annotation: Any, sections: dict[type[BaseModel], list[str]]) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_text(args[0], sections)
    if origin is Literal:
        return " or ".join(f"`{value}`" for value in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_text(a, sections) for a in args if a is not type(None))
    if origin is list:
        return f"list of {_type_text(args[0], sections)}"
    if origin is dict:
        return f"mapping of {_type_text(args[0], sections)} to {_type_text(args[1], sections)}"
    if annotation in sections:
        return f"mapping: [{sections[annotation][0]}](#{slug(sections[annotation][0])})"
    return _SCALARS.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _number(value: object) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def _bounds(field: FieldInfo) -> str:
    found = []
    for kind, sign, attribute in _BOUNDS:
        for item in field.metadata:
            if isinstance(item, kind):
                found.append(f"{sign} {_number(getattr(item, attribute))}")
    return ", ".join(found)


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True, validated_data={})
    if isinstance(value, BaseModel):
        return "its defaults"
    if value is None:
        return "unset"
    if isinstance(value, IPv4Network):
        value = str(value)
    return f"`{json.dumps(value)}`"


def _walk(root: type[BaseModel]) -> dict[type[BaseModel], list[str]]:
    """Every model reachable from `root`'s fields, nearest first, with the key paths where it
    is met (a part used twice, such as a role's autoscaling, has one section). A mapping's
    entries are `KEY.*`, a list's items `KEY[*]`."""
    sections: dict[type[BaseModel], list[str]] = {}
    queue: deque[tuple[type[BaseModel], str]] = deque([(root, "")])
    while queue:
        model, path = queue.popleft()
        sections.setdefault(model, []).append(path)
        if len(sections[model]) > 1:
            continue
        for name, field in model.model_fields.items():
            origin = typing.get_origin(field.annotation)
            step = f"{path}.{name}" if path else name
            step += ".*" if origin is dict else "[*]" if origin is list else ""
            queue.extend((part, step) for part in _models_in(field.annotation))
    return sections


def fields_reference(root: type[BaseModel], title: str, prefix: str = "") -> str:
    """A section per model reachable from `root`: one row per field with its type, bounds,
    default and description. `prefix` is what a file writes before a top-level key."""
    sections = _walk(root)
    for model, paths in sections.items():
        sections[model] = [prefix + p if p else title for p in paths]
    out: list[str] = []
    for model, paths in sections.items():
        heading, *also = paths
        own = inspect.cleandoc(vars(model).get("__doc__") or "")
        doc = own.split("\n\n")[0].replace("\n", " ")
        if also:
            doc += " Also at " + ", ".join(f"`{p}`" for p in also) + "."
        out += [f"### {heading}", "", doc, ""]
        out += ["| key | type | default | description |", "| --- | --- | --- | --- |"]
        for name, field in model.model_fields.items():
            shown = prefix + name if model is root else name
            kind = _type_text(field.annotation, sections)
            bounds = _bounds(field)
            kind += f" ({bounds})" if bounds else ""
            description = cell(field.description or "")
            out.append(f"| `{shown}` | {cell(kind)} | {_default(field)} | {description} |")
        out.append("")
    return "\n".join(out)


def profile_reference() -> str:
    from serving.spec.profile import ModelSpec

    return fields_reference(ModelSpec, "profile")


def stack_keys_reference() -> str:
    from infra.platform.stack_config import (
        GCP_NAMESPACE,
        NAMESPACE,
        SECRET_KEYS,
        GcpConfig,
        StackConfig,
    )

    secrets = ", ".join(f"`{NAMESPACE}:{name}`" for name in sorted(SECRET_KEYS))
    return "\n".join(
        [
            fields_reference(StackConfig, f"{NAMESPACE}:", f"{NAMESPACE}:"),
            fields_reference(GcpConfig, f"{GCP_NAMESPACE}:", f"{GCP_NAMESPACE}:"),
            f"### secrets\n\nSet with `pulumi config set --secret`, read by the program only "
            f"(never from plaintext): {secrets}.",
        ]
    )


def cli_reference() -> str:
    """Every command as `servestack --help` lists it, the `local` group's under it: usage, the
    docstring, each argument and option with its help and default, read from the Typer app
    through click."""
    import typer
    import typer.main

    from infra.cli.app import app

    def section(command: Any, context: typer.Context, path: str) -> list[str]:
        if hasattr(command, "commands"):  # a group: its commands under it
            lines = [f"### {path}", "", (command.help or "").strip(), ""]
            for name, sub in command.commands.items():
                if not sub.hidden:
                    child = typer.Context(sub, info_name=name, parent=context)
                    lines += section(sub, child, f"{path} {name}")
            return lines
        usage = command.get_usage(context).removeprefix("Usage: ")
        lines = [f"### {path}", "", f"```\n{usage}\n```", "", (command.help or "").strip()]
        records = [p.get_help_record(context) for p in command.params if not p.hidden]
        if records:
            lines += ["", "| argument or option | what |", "| --- | --- |"]
            lines += [f"| `{opts}` | {cell(re.sub(r' {2,}', ' ', what))} |" for opts, what in
                      filter(None, records)]  # fmt: skip
        return [*lines, ""]

    group: Any = typer.main.get_command(app)
    root = typer.Context(group, info_name="servestack")
    out = [(group.help or "").strip(), ""]
    for name, command in group.commands.items():
        if not command.hidden:
            out += section(command, typer.Context(command, info_name=name, parent=root),
                           f"servestack {name}")  # fmt: skip
    return "\n".join(out)


def policies_table() -> str:
    from policies.pack import POLICIES

    rows = ["| policy | enforcement | holds that |", "| --- | --- | --- |"]
    for policy in POLICIES:
        level = policy.enforcement_level.value if policy.enforcement_level else "advisory"
        rows.append(f"| `{policy.name}` | {level} | {cell(policy.description)} |")
    return "\n".join(rows)


def verdicts_table() -> str:
    from serving.plan.rules import RULES

    rows = ["| code | severity | profile field | meaning |", "| --- | --- | --- | --- |"]
    for rule in RULES:
        rows.append(f"| `{rule.code}` | {rule.severity} | `{rule.field}` | {cell(rule.meaning)} |")
    return "\n".join(rows)


def fast_paths_table() -> str:
    from serving.catalog.fast_paths import FAST_PATHS, FORWARD_BODY_VARIABLE

    rows = ["| profile switch (`fast_paths:`) | variable on the head and every worker | what |"]
    rows.append("| --- | --- | --- |")
    for path in FAST_PATHS:
        rows.append(f"| `{path.field}` | `{path.variable}` | {path.description} |")
    rows.append(
        f"| (a prompt-reading router behind direct streaming) | `{FORWARD_BODY_VARIABLE}` | "
        "HAProxy forwards the request body to the router. |"
    )
    return "\n".join(rows)


REGIONS: dict[str, Maker] = {
    "profile": anywhere(profile_reference),
    "stack-keys": anywhere(stack_keys_reference),
    "cli": anywhere(cli_reference),
    "policies": anywhere(policies_table),
    "verdicts": anywhere(verdicts_table),
    "fast-paths": anywhere(fast_paths_table),
}
