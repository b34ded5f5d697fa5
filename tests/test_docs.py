"""Every generated region (README.md and the pages under docs/) is what scripts/generate_docs.py
makes from the code today: a policy, a metric or a bench report changed without its
documentation fails here."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "generate_docs.py"


def test_the_generated_regions_have_not_drifted() -> None:
    spec = importlib.util.spec_from_file_location("generate_docs", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--check"]) == 0, "run: .venv/bin/python scripts/generate_docs.py"
