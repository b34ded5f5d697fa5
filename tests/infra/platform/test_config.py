"""Stack config is read in one place: the offline CLI (from the stack file) and the Pulumi
program (through `pulumi.Config`) get the same typed config, and Pulumi.yaml declares what its
schema can express with the defaults `StackConfig` holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_support import copy_repo
from infra_support import RecordingMocks, pulumi_config, run, use_stack
from repo import REPO

from infra.platform.config import load_pulumi_stack, load_stack
from infra.platform.pulumi_project import render
from infra.platform.stack_config import StackConfig
from serving.errors import ServestackError

# Keys Pulumi's project schema cannot declare: mappings, and an optional string with no default.
UNDECLARABLE = {"gpu_pools", "prices", "cluster_zone", "edge_host", "maintenance_exclusions"}


def _declared() -> dict[str, dict[str, Any]]:
    schema: dict[str, dict[str, Any]] = yaml.safe_load((REPO / "Pulumi.yaml").read_text())["config"]
    return schema


class TestPulumiSchema:
    """Pulumi.yaml declares every key it can, with StackConfig's defaults, because Pulumi
    applies its own defaults to the program while the CLI applies StackConfig's."""

    def test_every_declarable_key_is_declared_and_no_other(self) -> None:
        assert set(_declared()) == set(StackConfig.model_fields) - UNDECLARABLE

    def test_declared_defaults_are_stackconfigs_defaults(self) -> None:
        defaults = StackConfig.model_validate({"models": ["any"]}).model_dump(mode="json")
        declared = {
            key: entry["default"] for key, entry in _declared().items() if "default" in entry
        }
        assert declared == {key: defaults[key] for key in declared}
        assert set(declared) == set(_declared()) - {"models"}  # models has no default

    def test_the_config_block_is_generated_from_stackconfig(self) -> None:
        """Pulumi.yaml's block is what scripts/generate_pulumi_yaml.py makes of StackConfig now:
        a field added, renamed or re-described without regenerating it fails here."""
        current = (REPO / "Pulumi.yaml").read_text()
        assert render(current) == current, "run: .venv/bin/python scripts/generate_pulumi_yaml.py"

    def test_declared_types_match_the_fields(self) -> None:
        kinds = {"string": str, "integer": int, "boolean": bool, "array": list}
        defaults = StackConfig.model_validate({"models": ["any"]}).model_dump(mode="json")
        for key, entry in _declared().items():
            if key in defaults and "default" in entry:
                assert isinstance(defaults[key], kinds[entry["type"]]), key


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_program_reads_the_same_config_as_the_cli(mocks: RecordingMocks, stack: str) -> None:
    use_stack(mocks, stack, pulumi_config(REPO / f"stacks/Pulumi.{stack}.yaml"))
    from_pulumi = run(lambda: load_pulumi_stack(REPO))
    from_file = load_stack(stack, REPO)
    assert from_pulumi.config == from_file.config
    assert from_pulumi.gcp == from_file.gcp
    assert from_pulumi.profiles == from_file.profiles
    assert from_pulumi.path == from_file.path


def test_a_value_pulumi_cannot_parse_names_the_key(mocks: RecordingMocks) -> None:
    config = pulumi_config(REPO / "stacks/Pulumi.dev.yaml")
    config["servestack:system_max_nodes"] = "three"
    use_stack(mocks, "dev", config)
    with pytest.raises(ServestackError) as caught:
        run(lambda: load_pulumi_stack(REPO))
    assert caught.value.field == "servestack:system_max_nodes"
    assert caught.value.source.endswith("stacks/Pulumi.dev.yaml")


def test_a_cidr_that_is_not_one_is_refused_at_load(tmp_path: Path) -> None:
    stacks = tmp_path / "stacks"
    (stacks / "models").mkdir(parents=True)
    (stacks / "models/llama-3.1-8b.yaml").write_text(
        (REPO / "stacks/models/llama-3.1-8b.yaml").read_text()
    )
    (stacks / "Pulumi.odd.yaml").write_text(
        yaml.safe_dump(
            {"config": {"servestack:models": ["llama-3.1-8b"], "servestack:subnet_cidr": "10.0/8"}}
        )
    )
    with pytest.raises(ServestackError) as caught:
        load_stack("odd", tmp_path)
    assert caught.value.field == "servestack:subnet_cidr"


def test_a_public_edge_without_source_ranges_is_refused(tmp_path: Path) -> None:
    repo = copy_repo(tmp_path / "repo")
    stack = repo / "stacks/Pulumi.dev.yaml"
    stack.write_text(stack.read_text() + "  servestack:edge_internal: false\n")
    with pytest.raises(ServestackError) as refused:
        load_stack("dev", repo)
    assert "servestack:edge_source_ranges" in str(refused.value)
    assert "edge_internal: true" in refused.value.fix


def test_a_stack_that_asks_for_digests_refuses_a_tag_only_image(tmp_path: Path) -> None:
    repo = copy_repo(tmp_path / "repo")
    stack = repo / "stacks/Pulumi.dev.yaml"
    stack.write_text(stack.read_text() + "  servestack:require_image_digest: true\n")
    with pytest.raises(ServestackError) as refused:
        load_stack("dev", repo)
    assert "servestack:ray_image" in str(refused.value) and "@sha256:" in refused.value.fix
    pinned = "rayproject/ray-llm:2.56.1-py311-cu128@sha256:" + "0" * 64
    stack.write_text(stack.read_text() + f"  servestack:ray_image: {pinned}\n")
    assert load_stack("dev", repo).config.ray_image == pinned
