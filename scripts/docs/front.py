"""The front pages' shared block: the two set-up commands, shown alike on README.md and on the
docs site's home page (docs/index.md), so the two cannot tell a newcomer different things. The
second command is `.ci/run`, which CI runs on a clean clone."""

from __future__ import annotations

from scripts.docs.regions import Maker, anywhere

# Command 1, as a newcomer pastes it: one line.
MAIN_JOB = " && ".join(
    (
        "python3 -m venv .venv",
        ".venv/bin/pip install -e .",
        ".venv/bin/servestack plan",
        ".venv/bin/servestack preview",
    )
)
SETUP = f"""\
On a fresh machine with Python 3.11 (no cloud account, no GPU):

```bash
# 1. Install and run the main job on the default stack (dev): plan every model, then run the
#    Pulumi program under the mock engine and judge it with the policy pack (no cloud account).
{MAIN_JOB}

# 2. Install everything (Ray Serve LLM 2.56.1 with its vLLM, test and docs tools) and run every
#    check and test: ruff, mypy, the docs site's build, pytest. CI runs exactly this.
bash .ci/run
```"""

REGIONS: dict[str, Maker] = {"setup": anywhere(lambda: SETUP)}
