"""Rewrite Pulumi.yaml's `config:` block from the stack schema (infra/platform/pulumi_project.py).

.venv/bin/python scripts/generate_pulumi_yaml.py          # rewrite it
.venv/bin/python scripts/generate_pulumi_yaml.py --check  # exit 1 if it has drifted
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from infra.platform.pulumi_project import render  # noqa: E402

PROJECT = ROOT / "Pulumi.yaml"


def main(argv: list[str]) -> int:
    current = PROJECT.read_text()
    wanted = render(current)
    if "--check" in argv:
        if wanted != current:
            print(
                "Pulumi.yaml's config block has drifted from StackConfig: run", __doc__.split()[-1]
            )
            return 1
        return 0
    PROJECT.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
