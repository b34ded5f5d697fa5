"""serving/catalog/vllm_args.py must be what scripts/generate_vllm_args.py makes from the pinned
vLLM,
or profiles would be checked against the wrong version's arguments."""

from __future__ import annotations

import importlib.util
from types import ModuleType

import vllm
from repo import REPO

from serving.catalog.vllm_args import VLLM_VERSION

SCRIPT = REPO / "scripts" / "generate_vllm_args.py"


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("generate_vllm_args", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_pinned_vllm_is_the_one_the_names_were_taken_from() -> None:
    assert vllm.__version__ == VLLM_VERSION


def test_the_checked_in_names_are_what_the_generator_makes_from_the_installed_vllm() -> None:
    assert generator().main(["--check"]) == 0
