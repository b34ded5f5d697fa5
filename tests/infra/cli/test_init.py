"""`servestack init` of catalog models: the profile it writes from the planner's recommendation
plans and previews clean in the stack it joins, for every catalog model that fits some catalog
machine; bad input gets one message naming the field and a fix, exit 2, and leaves every file as
it was. (Models read from a config.json: test_init_config.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import copy_repo, run
from pulumi_policy import EnforcementLevel

from infra.cli.init import init_model
from infra.deploy.preview import judge, record
from infra.platform.config import load_stack
from serving import catalog
from serving.errors import ServestackError
from serving.plan.planner import plan
from serving.recommend.ranking import (
    DEFAULT_ITL_TARGET_S,
    DEFAULT_TTFT_TARGET_S,
    catalog_spec,
    recommend,
)

# prod is regional: every GPU the catalog knows is stocked in some zone of its region.
STACK = "prod"


def _fits_some_machine(key: str) -> bool:
    ranked = recommend(catalog_spec(key), DEFAULT_ITL_TARGET_S, DEFAULT_TTFT_TARGET_S)
    return any(c.refused_by is None for c in ranked)


@pytest.mark.parametrize("key", sorted(catalog.ARCHITECTURES))
def test_an_initialised_catalog_model_plans_and_previews_clean(key: str, tmp_path: Path) -> None:
    root = copy_repo(tmp_path / "repo")
    stack_file = root / "stacks" / f"Pulumi.{STACK}.yaml"
    before = stack_file.read_text()
    name = f"{key}-init"  # beside any shipped profile of the same model
    if not _fits_some_machine(key):
        with pytest.raises(ServestackError):
            init_model(key, STACK, name=name, root=root)
        assert stack_file.read_text() == before
        return
    written = init_model(key, STACK, name=name, root=root)
    assert written.profile == root / "stacks" / "models" / f"{name}.yaml"
    stack = load_stack(STACK, root)
    assert stack.profiles[name] == written.spec
    assert plan(written.spec, stack.config.prices).ok
    # The stack file kept everything it had (its comments too) and gained one model.
    assert stack_file.read_text().replace(f"    - {name}\n", "") == before
    mandatory = [
        f"{v.policy}: {v.message}"
        for v in judge(record(STACK, root))
        if v.enforcement == EnforcementLevel.MANDATORY.value
    ]
    assert mandatory == []


def test_the_sweep_covers_models_that_fit() -> None:
    assert sum(_fits_some_machine(key) for key in catalog.ARCHITECTURES) >= 10


def test_init_picks_what_the_stack_can_build(tmp_path: Path) -> None:
    """dev is zonal and builds its one GPU size as Spot: the choice is the recommender's best
    among what that zone stocks, not the overall winner."""
    root = copy_repo(tmp_path / "repo")
    written = init_model("qwen3-8b", "dev", root=root)
    zone_ok = load_stack("dev", root)
    assert written.spec.name in zone_ok.profiles
    ranked = recommend(catalog_spec("qwen3-8b"), DEFAULT_ITL_TARGET_S, DEFAULT_TTFT_TARGET_S)
    assert written.choice in ranked and written.choice.meets_targets


def test_the_cli_round_trip_init_plan_preview(tmp_path: Path) -> None:
    root = copy_repo(tmp_path / "repo")
    made = run(root, "init", "Qwen/Qwen3-8B", "--architecture", "qwen3-8b", "--name", "my-qwen")
    assert made.returncode == 0, made.stderr
    assert "wrote stacks/models/my-qwen.yaml" in made.stdout
    planned = run(root, "plan", "--model", "my-qwen")
    assert planned.returncode == 0, planned.stdout + planned.stderr
    previewed = run(root, "preview")
    assert previewed.returncode == 0, previewed.stdout + previewed.stderr
    again = run(root, "init", "Qwen/Qwen3-8B", "--architecture", "qwen3-8b", "--name", "my-qwen")
    assert again.returncode == 2 and "never overwrites" in again.stderr


@pytest.mark.parametrize(
    ("args", "field", "words"),
    [
        (["qwen3-8", "--stack", "dev"], "MODEL", "did you mean 'qwen3-8b'"),
        # A repo without --architecture reads its config.json: tests/infra/cli/test_init_config.py
        (["qwen3-8b", "--revision", "main"], "--revision", "is for an architecture read from"),
        (["Qwen/Qwen3-8B", "--architecture", "qwen-8b"], "--architecture", "did you mean"),
        (["qwen3-8b", "--accelerator", "h100"], "--accelerator", "did you mean 'h100-80gb'"),
        (["qwen3-8b", "--max-model-len", "10000000"], "--max-model-len", "use a length from"),
        (["qwen3-8b", "--name", "Bad Name!"], "name", "fix:"),
        (["qwen3-32b"], "", "never overwrites"),  # stacks/models/qwen3-32b.yaml is shipped
        (["llama-3.1-8b"], "", "never overwrites"),
        (["qwen3-8b", "--stack", "nope"], "", "no stack named 'nope'"),
        # dev is zonal (us-central1-a), which stocks no H200
        (["qwen3-0.6b", "--accelerator", "h200-141gb"], "MODEL", "not on anything the stack dev"),
    ],
    ids=[
        "unknown-model",
        "revision-of-a-catalog-model",
        "unknown-architecture",
        "unknown-accelerator",
        "context-too-long",
        "bad-name",
        "existing-profile",
        "model-already-in-stack",
        "unknown-stack",
        "gpu-the-stack-cannot-build",
    ],
)
def test_bad_input_is_refused_clearly_and_changes_nothing(
    tmp_path: Path, args: list[str], field: str, words: str
) -> None:
    root = copy_repo(tmp_path / "repo")
    before = {p: p.read_bytes() for p in (root / "stacks").rglob("*") if p.is_file()}
    result = run(root, "init", *args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
    assert f": {field}:" in result.stderr if field else True
    assert words in result.stderr
    after = {p: p.read_bytes() for p in (root / "stacks").rglob("*") if p.is_file()}
    assert after == before
