"""The README's generated tables (policies, fast paths) are what scripts/generate_docs.py makes
from repo import REPO
from the code today: a policy added or changed without its documentation fails here."""

from __future__ import annotations

import importlib.util

from repo import REPO

SCRIPT = REPO / "scripts" / "generate_docs.py"


def test_the_readmes_generated_tables_have_not_drifted() -> None:
    spec = importlib.util.spec_from_file_location("generate_docs", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--check"]) == 0, "run: .venv/bin/python scripts/generate_docs.py"
