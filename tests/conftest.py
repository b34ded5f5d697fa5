"""Fixtures shared by the command-line tests (copies of the repository's stacks to run in), and a
guard every test runs under: it leaves no Ray running in the pytest process."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from cli_support import TOO_BIG, copy_repo
from suite_groups import in_local_ray_group


# First: xdist's own hook (`--dist loadgroup`) reads the marker to group the tests, and pluggy
# calls the plugin registered last, xdist's worker, before this conftest unless told otherwise.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if in_local_ray_group(item.path):
            item.add_marker(pytest.mark.xdist_group("local-ray"))


@pytest.fixture(autouse=True)
def leaves_no_ray_running(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail the test that leaves a Ray initialized in this process. Ray's APIs start a local Ray
    on first use; one left behind holds its memory for the rest of the run and makes the next
    test that starts its own Ray fail on "ray.init twice", far from its cause. It is shut down
    here so that only the test that left it fails. (A Ray that a fixture of wider scope holds
    across its tests is running when each test begins: not theirs to answer for.)"""
    ray = sys.modules.get("ray")
    held = ray is not None and ray.is_initialized()
    yield
    ray = sys.modules.get("ray")
    if not held and ray is not None and ray.is_initialized():
        ray.shutdown()
        pytest.fail(
            f"{request.node.nodeid} left a Ray initialized in the pytest process (a Ray API "
            "used outside local_serve starts one): end it in the test, or keep Ray's API from "
            "starting one",
            pytrace=False,
        )


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
