"""`servestack init ORG/NAME --config` of every stored config.json (and DeepSeek V3.2's): the
profile it writes plans and previews clean in the stack it joins wherever some catalog machine
holds the model, and where none does it is refused with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import copy_repo
from importer_support import FIXTURES, HF_CONFIGS, deepseek_v3_2_config
from pulumi_policy import EnforcementLevel

from infra.cli.init import init_model
from infra.deploy.preview import judge, record
from infra.platform.config import load_stack
from serving.catalog.importer import import_architecture, parse_json
from serving.errors import ServestackError
from serving.plan.planner import plan
from serving.recommend.ranking import DEFAULT_ITL_TARGET_S, DEFAULT_TTFT_TARGET_S, recommend
from serving.spec.profile import ModelSpec

STACK = "prod"  # regional: every GPU the catalog knows is stocked in some zone of its region
V3_2 = "deepseek-ai__DeepSeek-V3.2-Exp"


def _config(fixture: str, root: Path) -> Path:
    if fixture != V3_2:
        return HF_CONFIGS / fixture / "config.json"
    path = root / "v3.2-config.json"
    path.write_text(json.dumps(deepseek_v3_2_config()))
    return path


def _fits_some_machine(config: Path, repo: str) -> bool:
    arch = import_architecture(parse_json(config.read_bytes(), str(config)))
    spec = ModelSpec.model_validate(
        {"name": "m", "source": repo, "architecture": arch.model_dump(),
         "accelerator": "h100-80gb", "max_model_len": min(8192, arch.max_position_embeddings)}
    )  # fmt: skip
    ranked = recommend(spec, DEFAULT_ITL_TARGET_S, DEFAULT_TTFT_TARGET_S)
    return any(c.refused_by is None for c in ranked)


@pytest.mark.parametrize("fixture", [*FIXTURES, V3_2])
def test_an_imported_model_plans_and_previews_clean(fixture: str, tmp_path: Path) -> None:
    root = copy_repo(tmp_path / "repo")
    config = _config(fixture, root)
    repo = fixture.replace("__", "/")
    stack_file = root / "stacks" / f"Pulumi.{STACK}.yaml"
    before = stack_file.read_text()
    name = fixture.split("__")[1].lower().replace(".", "-") + "-import"
    if not _fits_some_machine(config, repo):
        with pytest.raises(ServestackError):
            init_model(repo, STACK, config=config, name=name, root=root)
        assert stack_file.read_text() == before
        assert not (root / "stacks" / "models" / f"{name}.yaml").exists()
        return
    written = init_model(repo, STACK, config=config, name=name, root=root)
    stack = load_stack(STACK, root)
    assert stack.profiles[name] == written.spec
    assert written.spec.architecture.source is not None
    assert plan(written.spec, stack.config.prices).ok
    mandatory = [
        f"{v.policy}: {v.message}"
        for v in judge(record(STACK, root))
        if v.enforcement == EnforcementLevel.MANDATORY.value
    ]
    assert mandatory == []
