"""Fixtures shared by the command-line tests: copies of the repository's stacks to run in."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from cli_support import TOO_BIG, copy_repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A private copy of the repository's stacks to edit."""
    return copy_repo(tmp_path / "repo")


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A shared, unedited copy for the commands that only read."""
    return copy_repo(tmp_path_factory.mktemp("pristine"))


@pytest.fixture
def too_big(repo: Path) -> Path:
    """A stack `big` serving the dev model and a bf16 70B on one A100 40GB, which cannot fit."""
    (repo / "stacks/models/llama-3.3-70b.yaml").write_text(yaml.safe_dump(TOO_BIG))
    (repo / "stacks/Pulumi.big.yaml").write_text(
        yaml.safe_dump({"config": {"servestack:models": ["llama-3.1-8b", "llama-3.3-70b"]}})
    )
    return repo
