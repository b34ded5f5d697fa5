"""The docs are what the code says today: every generated region (README.md and the pages under
docs/) is what scripts/generate_docs.py makes now, the README stays a front page whose links
lead somewhere, and the verdicts table names exactly the planner's rules."""

from __future__ import annotations

import importlib.util
import re

from repo import REPO

ROOT = REPO
SCRIPT = ROOT / "scripts" / "generate_docs.py"
README = ROOT / "README.md"
README_MOST_LINES = 250
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_generated_regions_have_not_drifted() -> None:
    spec = importlib.util.spec_from_file_location("generate_docs", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--check"]) == 0, "run: .venv/bin/python scripts/generate_docs.py"


def test_the_readme_is_a_front_page_of_at_most_250_lines() -> None:
    lines = README.read_text().count("\n")
    assert lines <= README_MOST_LINES, f"README.md has {lines} lines: move the rest into docs/"


def test_every_link_of_the_readme_leads_to_a_file_of_the_repository() -> None:
    targets = [t for t in _LINK.findall(README.read_text()) if not re.match(r"[a-z]+:", t)]
    assert targets, "the README links into the docs site"
    missing = [t for t in targets if not (ROOT / t.split("#")[0]).exists()]
    assert missing == []
    assert any(t.startswith("docs/") for t in targets)


def test_the_verdicts_page_names_each_verdict_the_planner_gives_with_its_severity() -> None:
    """Each rule of the registry is a row with its code, severity and field, and no row is more:
    the page is generated from the registry, so a rule added or dropped shows there."""
    from serving.plan.rules import RULES

    said = {(rule.code, rule.severity, rule.field) for rule in RULES}
    page = (ROOT / "docs" / "reference" / "verdicts.md").read_text()
    row = r"^\| `([a-z0-9-]+)` \| (error|warning) \| `([a-z_.]+)` \|"
    listed = set(re.findall(row, page, re.MULTILINE))
    assert len(said) == len(RULES) >= 9, "the registry lists every rule the planner had"
    assert listed == said
