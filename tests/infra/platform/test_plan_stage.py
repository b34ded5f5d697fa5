"""The plan is a stage: `pulumi up`'s program and `servestack render` plan each model once, and
every later step (compiler, platform, manifests, components, dashboards) reads that plan."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from cli_support import copy_repo
from infra_support import RecordingMocks, pulumi_config, run, use_stack
from repo import REPO
from typer.testing import CliRunner

import infra.__main__ as program
from infra.cli.app import app
from infra.platform.config import load_stack
from serving.plan import planner

STACKS = ["dev", "prod"]


@pytest.fixture
def plans(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often each model is planned: `serving.plan.planner.plan` wrapped with a counter wherever
    a module of ours holds it (this file imports the program and the CLI first, so theirs are
    among them)."""
    counted: Counter[str] = Counter()
    original = planner.plan

    def plan(spec: Any, *args: Any, **kwargs: Any) -> planner.Plan:
        counted[spec.name] += 1
        return original(spec, *args, **kwargs)

    for name, module in list(sys.modules.items()):
        ours = name.split(".")[0] in {"serving", "infra", "policies"}
        if ours and getattr(module, "plan", None) is original:
            monkeypatch.setattr(module, "plan", plan)
    return counted


@pytest.mark.parametrize("stack", STACKS)
def test_the_pulumi_program_plans_each_model_once(
    stack: str, mocks: RecordingMocks, plans: Counter[str]
) -> None:
    use_stack(mocks, stack, pulumi_config(REPO / f"stacks/Pulumi.{stack}.yaml"))
    run(program.main)
    models = [spec.name for spec in load_stack(stack, REPO).profiles.values()]
    assert mocks.of_type("kubernetes:ray.io/v1:RayService"), "the program registered no model"
    assert plans == Counter(models)


@pytest.mark.parametrize("stack", STACKS)
def test_render_plans_each_model_once(
    stack: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plans: Counter[str]
) -> None:
    repo = copy_repo(tmp_path / "repo")
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(app, ["render", stack, "--out", "out"])
    assert result.exit_code == 0, result.output
    models = [spec.name for spec in load_stack(stack, repo).profiles.values()]
    assert sorted(path.name for path in (repo / "out").iterdir()) == sorted(models)
    assert plans == Counter(models)
