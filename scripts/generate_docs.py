"""Rewrite the docs' generated regions (README.md and every page under docs/) from the code
that holds their facts, or check that none has drifted; the work is `scripts/docs/`'s.

    .venv/bin/python scripts/generate_docs.py          # rewrite every page's marked regions
    .venv/bin/python scripts/generate_docs.py --check  # exit 1 if any region has drifted

Each region sits between `<!-- generated:NAME -->` and `<!-- /generated:NAME -->`;
tests/test_docs.py runs the check in CI.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.docs.regions import main  # noqa: E402  (the repository root is on the path now)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
