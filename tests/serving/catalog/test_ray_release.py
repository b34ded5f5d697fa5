"""The Ray version an image tag names, and the floor the pack holds images to."""

from __future__ import annotations

import pytest
from packaging.version import Version

from serving.catalog.ray_release import DEFAULT_RAY_IMAGE, RAY_FLOOR, image_ray_version


@pytest.mark.parametrize(
    ("image", "version"),
    [
        ("rayproject/ray-llm:2.56.1-py311-cu128", "2.56.1"),
        ("rayproject/ray-llm:2.57.0", "2.57.0"),
        ("rayproject/ray-llm:2.56.10-py311", "2.56.10"),
        # A release candidate comes before its release: 2.56.1rc1 does not have the fix.
        ("rayproject/ray-llm:2.56.1rc1-py311-cu128", "2.56.1rc1"),
        # A registry port is not a tag, and a digest does not hide the tag before it.
        ("registry.local:5000/ray-llm:2.58.0-py311@sha256:0123abcd", "2.58.0"),
    ],
)
def test_the_tag_names_the_ray_version(image: str, version: str) -> None:
    assert image_ray_version(image) == Version(version)


@pytest.mark.parametrize(
    "image",
    [
        "rayproject/ray-llm:nightly-py311",
        "rayproject/ray-llm",
        "registry.local:5000/ray-llm",
        "rayproject/ray-llm@sha256:0123abcd",
        "rayproject/ray-llm:2.56",
    ],
)
def test_a_tag_without_a_release_names_no_version(image: str) -> None:
    assert image_ray_version(image) is None


def test_the_default_image_is_at_the_floor() -> None:
    assert image_ray_version(DEFAULT_RAY_IMAGE) == RAY_FLOOR
    assert Version("2.56.1rc1") < RAY_FLOOR
