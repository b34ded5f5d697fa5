"""`servestack serve --local` refuses a profile its plan refuses, as `plan` and `render` do: the
cluster would never get this application, so a local run must not show it working. The
command stops before any Ray starts, with the verdict's own line."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import edit_yaml, run

from infra.platform.config import load_stack
from serving.plan.planner import plan

LORA_PROFILE = "stacks/models/llama-3.1-8b-lora.yaml"


@pytest.mark.parametrize("engine", ["simulated", "vllm"])
def test_serve_local_exits_with_the_error_verdict_plan_prints(repo: Path, engine: str) -> None:
    # Ray's prefix router cannot see an adapter under direct streaming (lora-routing).
    edit_yaml(repo / LORA_PROFILE, lambda d: d.update(router="prefix_affinity"))
    (spec,) = load_stack("lora", repo).profiles.values()
    (refused,) = [v for v in plan(spec).verdicts if v.severity == "error"]
    planned = run(repo, "plan", "lora")
    served = run(repo, "serve", "--local", "lora", "--engine", engine, "--port", "0")
    assert planned.returncode == served.returncode == 1
    (line,) = [line for line in served.stderr.splitlines() if refused.code in line]
    assert line.startswith("error: ") and refused.message in line
    # The same words `plan` prints for the verdict (its table wraps lines at 110 columns).
    assert f"error [{refused.code}] {refused.message}" in " ".join(planned.stdout.split())
    assert f"error [{refused.code}] {refused.message}" in line
    assert "local Ray" not in served.stderr  # refused before any Ray started
