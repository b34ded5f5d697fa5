"""The router table names classes that exist, in the Ray Serve 2.56.1 this project pins, and
that are request routers; and the facts it records about each agree with what the class does."""

from __future__ import annotations

import importlib
import typing

import pytest

from serving.compile.routers import RAY_DEFAULT_ROUTER_CLASS, ROUTERS
from serving.spec.parts import RouterKind


def load(class_path: str) -> type:
    module, _, name = class_path.partition(":")
    loaded: type = getattr(importlib.import_module(module), name)
    return loaded


def test_every_router_kind_a_profile_can_name_is_in_the_table() -> None:
    assert set(ROUTERS) == set(typing.get_args(RouterKind))


@pytest.mark.parametrize(
    "class_path",
    sorted({r.class_path for r in ROUTERS.values() if r.class_path} | {RAY_DEFAULT_ROUTER_CLASS}),
)
def test_every_router_class_path_imports_as_a_request_router(class_path: str) -> None:
    from ray.serve.request_router import RequestRouter

    assert issubclass(load(class_path), RequestRouter)


@pytest.mark.parametrize("kind", sorted(k for k, r in ROUTERS.items() if r.class_path))
def test_a_router_ships_code_exactly_when_its_class_is_servestacks(kind: str) -> None:
    router = ROUTERS[kind]  # type: ignore[index]
    assert router.class_path is not None
    assert router.ships_code == router.class_path.startswith("serving.")
