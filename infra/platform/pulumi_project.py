"""Pulumi.yaml's `config:` block, made from the stack schema (`StackConfig`) so the two never
disagree: Pulumi applies the declared defaults to the program while the CLI applies
StackConfig's, and refuses a stack that lacks a declared key without a default.

`scripts/generate_pulumi_yaml.py` writes the block (from the marker line to the end of the file)
and, with `--check`, fails when it has drifted; tests/infra/platform/test_config.py runs the check.
"""

from __future__ import annotations

import textwrap
from typing import Any

import yaml

from infra.platform.stack_config import SECRET_KEYS, StackConfig

# Everything from this line to the end of Pulumi.yaml is generated.
MARKER = "# The servestack: keys"
# What Pulumi's project schema can type; it has no mappings and no optional value without a
# default, and its arrays hold plain values.
_PLAIN = {"string", "integer", "boolean"}


def _declarable(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    if kind == "array":
        return schema.get("items", {}).get("type") in _PLAIN
    return kind in _PLAIN


def _shape(schema: dict[str, Any], definitions: dict[str, Any]) -> str:
    """What an undeclarable key holds, as a stack file writes it: `{<key>: {field, ...}}`."""

    def fields(ref: dict[str, Any]) -> str:
        name = ref.get("$ref", "").rpartition("/")[2]
        return "{" + ", ".join(definitions[name]["properties"]) + "}" if name else "value"

    if "additionalProperties" in schema:
        return "{<key>: " + fields(schema["additionalProperties"]) + "}"
    if schema.get("type") == "array":
        return "[" + fields(schema["items"]) + "]"
    return "string"


def project_config() -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """(the declared keys as Pulumi's schema spells them, the keys it cannot declare with what
    each holds)."""
    document = StackConfig.model_json_schema()
    properties, definitions = document["properties"], document.get("$defs", {})
    defaults = StackConfig.model_validate({"models": ["any"]}).model_dump(mode="json")
    required = {name for name, field in StackConfig.model_fields.items() if field.is_required()}
    declared: dict[str, dict[str, Any]] = {}
    undeclared: dict[str, str] = {}
    for name, field in StackConfig.model_fields.items():
        schema, description = properties[name], field.description or ""
        if not _declarable(schema):
            undeclared[name] = f"{_shape(properties[name], definitions)}: {description}"
            continue
        entry: dict[str, Any] = {"type": schema["type"]}
        if schema["type"] == "array":
            entry["items"] = {"type": schema["items"]["type"]}
        entry["description"] = description
        if name not in required:
            entry["default"] = defaults[name]
        declared[name] = entry
    return declared, undeclared


def config_block() -> str:
    """The generated tail of Pulumi.yaml, from MARKER on."""
    declared, undeclared = project_config()
    lines = [
        f"{MARKER}, generated from StackConfig (infra/platform/stack_config.py) by",
        "# scripts/generate_pulumi_yaml.py: edit the fields there, then run it. Pulumi refuses",
        "# a stack that lacks a key declared here without a default, so each optional key carries",
        "# StackConfig's default. Not declared, because this schema has no mappings and no",
        "# optional value without a default:",
        *(
            line
            for name, text in undeclared.items()
            for line in textwrap.wrap(
                f"{name}: {text}", 96, initial_indent="#   ", subsequent_indent="#     "
            )
        ),
        *textwrap.wrap(
            "Secrets, set with `pulumi config set --secret` and read by the program only (never "
            f"in this schema, never in plaintext): {', '.join(sorted(SECRET_KEYS))}.",
            96,
            initial_indent="# ",
            subsequent_indent="# ",
        ),
    ]
    body = yaml.safe_dump({"config": declared}, sort_keys=False, width=96, allow_unicode=True)
    return "\n".join(lines) + "\n" + body


def render(current: str) -> str:
    """Pulumi.yaml with its generated tail made anew; the head (name, runtime, main) is kept."""
    head, found, _ = current.partition(MARKER)
    if not found:
        raise ValueError(f"Pulumi.yaml has no line starting {MARKER!r} to generate from")
    return head + config_block()
