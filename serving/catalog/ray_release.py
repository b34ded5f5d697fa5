"""The Ray release servestack builds for: its floor, the default image, and how an image's tag
names the Ray version it carries. Config validation, the manifests and the policy pack all ask
here, so the floor and the tag grammar have one definition."""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

from serving.catalog.pins import RAY

# Ray 2.56.0 hangs every request under direct streaming + PrefixCacheAffinityRouter (ray#64326,
# fixed in 2.56.1); `ray[serve,llm]==2.56.1` is what the local data plane and the tests run.
RAY_FLOOR = Version(RAY)
RAY_FLOOR_REASON = (
    "Ray 2.56.0 hangs every request with direct streaming and a prefix-affinity router (ray#64326)"
)
DEFAULT_RAY_IMAGE = f"rayproject/ray-llm:{RAY_FLOOR}-py311-cu128"

# rayproject tags start with the release: `2.56.1-py311-cu128`, `2.56.1rc1-py311`, `2.56.1`.
_TAG_RELEASE = re.compile(r"v?(\d+\.\d+\.\d+(?:(?:a|b|rc)\d+)?)(?:-|$)")


def image_ray_version(image: str) -> Version | None:
    """The Ray version an image's tag starts with, or None when the tag names none.

    The tag is what follows the last `:` of the image's last path segment, before any
    `@sha256:` digest, so a registry port (`host:5000/ray:...`) is never read as a version.
    """
    name = image.split("@", 1)[0]
    last_segment = name.rsplit("/", 1)[-1]
    if ":" not in last_segment:
        return None
    tag = last_segment.split(":", 1)[1]
    match = _TAG_RELEASE.match(tag)
    if match is None:
        return None
    try:
        return Version(match.group(1))
    except InvalidVersion:
        return None
