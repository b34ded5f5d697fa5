"""Running the `servestack` command as users run it: the installed console script in a
subprocess, from a copy of the repository's stacks."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from repo import REPO

from infra.platform.config import load_stack
from serving.plan.planner import plan

# Errors go through a rich console that follows COLUMNS: wide enough that no message wraps, so
# messages are asserted whole. (Piped stdout is fixed at 110 columns by the CLI itself.)
WIDE = 1000
NARROW = 80  # what rich assumes when stderr is not a terminal and COLUMNS is unset


def interruptible() -> None:
    """`preexec_fn` of a CLI a test stops with SIGINT, as Ctrl-C would: SIGINT back to its
    default. A shell running the suite in the background (`cmd &` without job control, as CI
    scripts do) starts it with SIGINT ignored, which its children inherit, and Python installs
    no KeyboardInterrupt handler for a signal ignored at start: the CLI would never see it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def servestack_command() -> list[str]:
    script = Path(sys.executable).with_name("servestack")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "infra.cli.app"]


def run(
    cwd: Path, *args: str, columns: int = WIDE, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"}
    }
    env["COLUMNS"] = str(columns)
    env.update(extra_env or {})
    return subprocess.run(
        [*servestack_command(), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def copy_repo(destination: Path) -> Path:
    """Pulumi.yaml and stacks/, all the CLI reads; resolved as the CLI resolves paths."""
    destination.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "Pulumi.yaml", destination / "Pulumi.yaml")
    shutil.copytree(REPO / "stacks", destination / "stacks")
    return destination.resolve()


def edit_yaml(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    document = yaml.safe_load(path.read_text())
    change(document)
    path.write_text(yaml.safe_dump(document, sort_keys=False))


DEV_STACK = "stacks/Pulumi.dev.yaml"

# A bf16 70B on one A100 40GB: it cannot fit.
TOO_BIG = {
    "name": "llama-3.3-70b",
    "source": "meta-llama/Llama-3.3-70B-Instruct",
    "architecture": "llama-3.3-70b",
    "accelerator": "a100-40gb",
    "parallelism": {"tensor": 1},
    "max_model_len": 8192,
}


def does_not_fit(root: Path) -> str:
    """The planner's does-not-fit message for the 70B of `too_big`'s stack."""
    spec = load_stack("big", root).profiles["llama-3.3-70b"]
    verdicts = [v for v in plan(spec).verdicts if v.code == "does-not-fit"]
    assert len(verdicts) == 1 and verdicts[0].severity == "error"
    return verdicts[0].message
