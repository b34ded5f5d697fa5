"""`servestack init ORG/NAME --config PATH`: the profile it writes carries the architecture read
from the model's config.json inline, with where it came from, and plans as written; without
--config the config comes from the Hub, and an unreachable Hub is one line that says how to use
--config. Tests never reach the Hub: they pass --config, block the network, or stand in for
huggingface_hub's download."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_support import copy_repo, run
from importer_support import HF_CONFIGS

from infra.cli import hub
from infra.cli.init import init_model
from infra.platform.config import load_stack
from serving.catalog.importer import INDEX_FILE

QWEN = "Qwen__Qwen2.5-7B-Instruct"
QWEN_CONFIG = HF_CONFIGS / QWEN / "config.json"
# Hand-counted in tests/serving/catalog/test_importer.py.
QWEN_PARAMS = 7_615_616_512


def _stacks(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in (root / "stacks").rglob("*") if p.is_file()}


def test_init_with_a_config_writes_the_imported_architecture_and_its_source(
    tmp_path: Path,
) -> None:
    root = copy_repo(tmp_path / "repo")
    made = run(root, "init", "Qwen/Qwen2.5-7B-Instruct", "--config", str(QWEN_CONFIG),
               "--stack", "prod", "--name", "team-qwen")  # fmt: skip
    assert made.returncode == 0, made.stderr
    profile = yaml.safe_load((root / "stacks" / "models" / "team-qwen.yaml").read_text())
    arch = profile["architecture"]
    digest = hashlib.sha256(QWEN_CONFIG.read_bytes()).hexdigest()
    assert arch["source"] == f"config.json sha256:{digest}"
    assert arch["hf_repo"] == "Qwen/Qwen2.5-7B-Instruct" and profile["source"] == arch["hf_repo"]
    assert arch["total_params"] == QWEN_PARAMS and arch["num_kv_heads"] == 4
    # The stack loads the profile as written, and plan --json reports what was imported.
    planned = run(root, "plan", "prod", "--model", "team-qwen", "--json")
    assert planned.returncode == 0, planned.stdout + planned.stderr
    (model_plan,) = json.loads(planned.stdout)["plans"]
    assert model_plan["total_params"] == model_plan["active_params"] == QWEN_PARAMS
    assert model_plan["architecture_source"] == f"config.json sha256:{digest}"


def test_a_folder_with_the_index_takes_its_exact_count(tmp_path: Path) -> None:
    root = copy_repo(tmp_path / "repo")
    folder = tmp_path / "qwen"
    folder.mkdir()
    shutil.copy(QWEN_CONFIG, folder / "config.json")
    names = [f"model.layers.{layer}.mlp.down_proj.weight" for layer in range(28)]
    # Two bytes a parameter, one parameter more than the shapes: the index's count wins.
    index = {
        "metadata": {"total_size": 2 * (QWEN_PARAMS + 1)},
        "weight_map": dict.fromkeys(names, "a"),
    }
    (folder / INDEX_FILE).write_text(json.dumps(index))
    written = init_model("Qwen/Qwen2.5-7B-Instruct", "prod", config=folder, root=root)
    assert written.spec.architecture.total_params == QWEN_PARAMS + 1
    assert load_stack("prod", root).profiles[written.spec.name] == written.spec


def test_the_catalog_model_and_its_imported_twin_plan_alike(tmp_path: Path) -> None:
    """Llama 3.1 8B from its config.json sizes as the catalog's entry does: same GPUs, same
    KV cache, weights within the catalog's rounding of the parameter count."""
    root = copy_repo(tmp_path / "repo")
    config = HF_CONFIGS / "meta-llama__Llama-3.1-8B-Instruct" / "config.json"
    imported = init_model("meta-llama/Llama-3.1-8B-Instruct", "prod", config=config,
                          accelerator="h100-80gb", name="imported-8b", root=root)  # fmt: skip
    listed = init_model("llama-3.1-8b", "prod", accelerator="h100-80gb", name="listed-8b",
                        root=root)  # fmt: skip
    assert imported.choice.layout == listed.choice.layout
    assert imported.choice.machine_type == listed.choice.machine_type


@pytest.mark.parametrize(
    ("args", "file", "field", "words"),
    [
        (["--config", "absent.json"], "absent.json", "", "does not exist"),
        (["--config", "bad.json"], "bad.json", "num_attention_heads", "do not divide"),
        (["--config", "empty"], "empty", "", "holds no config.json"),
        (["--config", "bad.json", "--architecture", "qwen3-8b"], "command line", "--config", ""),
        (["--config", "bad.json", "--revision", "main"], "command line", "--revision", ""),
    ],
    ids=["missing-file", "heads-do-not-divide", "folder-without-config", "two-architectures",
         "revision-with-a-file"],
)  # fmt: skip
def test_a_config_that_cannot_be_used_is_refused_and_nothing_is_written(
    tmp_path: Path, args: list[str], file: str, field: str, words: str
) -> None:
    root = copy_repo(tmp_path / "repo")
    bad = json.loads(QWEN_CONFIG.read_text()) | {"num_attention_heads": 27}
    (root / "bad.json").write_text(json.dumps(bad))
    (root / "empty").mkdir()
    before = _stacks(root)
    result = run(root, "init", "Qwen/Qwen2.5-7B-Instruct", *args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith(f"error: {file}: {field}".rstrip(": "))
    assert words in result.stderr and "Traceback" not in result.stderr
    assert _stacks(root) == before


# A proxy that refuses every connection: huggingface_hub's requests go nowhere.
BLOCKED = {"HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9",
           "https_proxy": "http://127.0.0.1:9", "http_proxy": "http://127.0.0.1:9",
           "NO_PROXY": "", "no_proxy": ""}  # fmt: skip


@pytest.mark.parametrize("network", ["blocked", "offline-mode"])
def test_an_unreachable_hub_is_one_line_pointing_at_config(tmp_path: Path, network: str) -> None:
    root = copy_repo(tmp_path / "repo")
    before = _stacks(root)
    cache = {"HF_HOME": str(tmp_path / "hf-home")}  # an empty cache: nothing to fall back on
    extra = BLOCKED if network == "blocked" else {"HF_HUB_OFFLINE": "1"}
    result = run(root, "init", "Qwen/Qwen3-8B", extra_env=cache | extra)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("error: command line: MODEL: ")
    assert "Hugging Face Hub is unreachable" in result.stderr
    assert "servestack init Qwen/Qwen3-8B --config PATH" in result.stderr
    assert _stacks(root) == before


def test_without_config_the_hub_revision_and_token_are_used_and_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """huggingface_hub's download stands in: it answers from a cache laid out as the real one
    (snapshots/<commit>/<file>), and the repo has no index (a single-file checkpoint)."""
    from huggingface_hub.errors import EntryNotFoundError

    commit = "0123456789abcdef0123456789abcdef01234567"
    snapshot = tmp_path / "hub" / "snapshots" / commit
    snapshot.mkdir(parents=True)
    shutil.copy(QWEN_CONFIG, snapshot / "config.json")
    asked: list[dict[str, Any]] = []

    def download(repo: str, filename: str, **options: Any) -> str:
        asked.append({"repo": repo, "filename": filename, **options})
        if not (snapshot / filename).is_file():
            raise EntryNotFoundError(f"{filename} is not in {repo}")
        return str(snapshot / filename)

    monkeypatch.setattr("huggingface_hub.hf_hub_download", download)
    monkeypatch.setattr(hub, "_probe", lambda repo: None)
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    root = copy_repo(tmp_path / "repo")
    written = init_model("Qwen/Qwen2.5-7B-Instruct", "prod", revision="v1", root=root)
    assert written.spec.architecture.source == f"hf:Qwen/Qwen2.5-7B-Instruct@{commit}"
    assert written.spec.architecture.total_params == QWEN_PARAMS
    assert [a["filename"] for a in asked] == ["config.json", INDEX_FILE]
    assert all(a["revision"] == "v1" and a["token"] == "hf_test_token" for a in asked)
    profile = yaml.safe_load(written.profile.read_text())
    assert profile["architecture"]["source"] == f"hf:Qwen/Qwen2.5-7B-Instruct@{commit}"
