"""Fixtures for infra tests: a fresh Pulumi mock engine per test and copies of the stacks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pulumi
import pytest
from cli_support import copy_repo
from infra_support import RecordingMocks, use_stack
from pulumi.runtime import settings


@pytest.fixture
def mocks() -> Iterator[RecordingMocks]:
    """A fresh recorder, root stack and config per test, so nothing leaks between tests."""
    recorder = RecordingMocks()
    use_stack(recorder, "dev", {})
    yield recorder
    settings.ROOT.set(None)
    pulumi.runtime.set_all_config({})


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A private copy of the repository's stacks to edit."""
    return copy_repo(tmp_path / "repo")
