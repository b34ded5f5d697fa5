"""One frozen base: every immutable pydantic type of servestack derives from `serving.frozen`'s,
so immutability and the refusal of unknown keys are said once."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from pydantic import BaseModel

from serving.frozen import Frozen

PACKAGES = ("serving", "infra", "policies")
# Modules that start a process or a Pulumi program when imported.
SKIPPED = {"infra.__main__", "policies.__main__"}


def ours() -> list[type[BaseModel]]:
    found: dict[str, type[BaseModel]] = {}
    for package_name in PACKAGES:
        package = importlib.import_module(package_name)
        for info in pkgutil.walk_packages(package.__path__, f"{package_name}."):
            if info.name in SKIPPED:
                continue
            module = importlib.import_module(info.name)
            for _, value in inspect.getmembers(module, inspect.isclass):
                if issubclass(value, BaseModel) and value.__module__ == info.name:
                    found[f"{info.name}.{value.__qualname__}"] = value
    return list(found.values())


def test_every_frozen_type_derives_from_the_shared_base() -> None:
    types = ours()
    assert len(types) > 20
    stray = [
        t.__qualname__ for t in types if t.model_config.get("frozen") and not issubclass(t, Frozen)
    ]
    assert stray == []
