"""Builders for the model-spec tests: the smallest accepted profile, and its problems as the loader
reports them."""

from __future__ import annotations

from typing import Any

import pytest

from serving import catalog
from serving.errors import ProfileValidationError, ServestackError
from serving.spec.loading import validate
from serving.spec.profile import ModelSpec

SOURCE = "stacks/models/test.yaml"

# The smallest profile the spec accepts: everything else has a default.
MINIMAL: dict[str, Any] = {
    "name": "llama-3.1-8b",
    "source": "meta-llama/Llama-3.1-8B-Instruct",
    "architecture": "llama-3.1-8b",
    "accelerator": "h100-80gb",
    "max_model_len": 4096,
}


def profile(**changes: Any) -> dict[str, Any]:
    return {**MINIMAL, **changes}


def accepted(**changes: Any) -> ModelSpec:
    return validate(ModelSpec, profile(**changes), SOURCE)


def problems(data: dict[str, Any]) -> list[ServestackError]:
    with pytest.raises(ProfileValidationError) as caught:
        validate(ModelSpec, data, SOURCE)
    return caught.value.errors


def the_problem(**changes: Any) -> ServestackError:
    found = problems(profile(**changes))
    assert len(found) == 1, [error.render() for error in found]
    return found[0]


def llama_8b_fields(**changes: Any) -> dict[str, Any]:
    """llama-3.1-8b's catalog entry as the inline fields a profile would carry."""
    fields = catalog.ARCHITECTURES["llama-3.1-8b"].model_dump()
    fields.update(key="my-llama", hf_repo=None, **changes)
    return fields
