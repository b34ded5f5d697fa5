"""Fixtures shared by the serving tests."""

from __future__ import annotations

import pytest
from compiled_support import SHIPPED_PROFILES

from serving.spec.loading import load_profile
from serving.spec.profile import ModelSpec


@pytest.fixture(params=SHIPPED_PROFILES, ids=lambda path: path.stem)
def shipped(request: pytest.FixtureRequest) -> ModelSpec:
    return load_profile(request.param)
