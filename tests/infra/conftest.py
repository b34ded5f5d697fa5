"""Fixtures for infra tests: a fresh Pulumi mock engine per test (copies of the stacks are
tests/conftest.py's)."""

from __future__ import annotations

from collections.abc import Iterator

import pulumi
import pytest
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
