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


def test_every_adapter_aware_router_reads_the_body_and_is_servestacks() -> None:
    """The lora-routing rule takes an adapter-aware router's body as forwarded: the compiler
    forwards it to every body-reading router. Ray's own routers read no adapter from it."""
    from serving.compile.environment import forwards_body
    from serving.spec.parts import ADAPTER_AWARE_ROUTERS
    from serving.spec.profile import ModelSpec

    assert ADAPTER_AWARE_ROUTERS
    for kind in ADAPTER_AWARE_ROUTERS:
        assert ROUTERS[kind].reads_body and ROUTERS[kind].ships_code
        spec = ModelSpec.model_validate(
            {"name": "m", "source": "org/model", "architecture": "llama-3.1-8b",
             "accelerator": "h100-80gb", "max_model_len": 4096, "router": kind}
        )  # fmt: skip
        assert forwards_body(spec)
