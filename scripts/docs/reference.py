"""The reference pages' tables: the policy pack and the fast-path switches. Each fact is
imported once, by name, where its maker reads it."""

from __future__ import annotations

from scripts.docs.regions import Maker, anywhere


def cell(text: str) -> str:
    """Text safe inside a Markdown table cell (no pipes, no raw HTML)."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace("\n", " ")


def policies_table() -> str:
    from policies.pack import POLICIES

    rows = ["| policy | enforcement | holds that |", "| --- | --- | --- |"]
    for policy in POLICIES:
        level = policy.enforcement_level.value if policy.enforcement_level else "advisory"
        rows.append(f"| `{policy.name}` | {level} | {cell(policy.description)} |")
    return "\n".join(rows)


def fast_paths_table() -> str:
    from serving.fast_paths import FAST_PATHS, FORWARD_BODY_VARIABLE

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
    "policies": anywhere(policies_table),
    "fast-paths": anywhere(fast_paths_table),
}
