"""serving/vllm_args.py must name exactly what the pinned vLLM accepts, or profiles would be
checked against the wrong version."""

from __future__ import annotations

import dataclasses

import vllm
from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.entrypoints.openai.cli_args import FrontendArgs

from serving.vllm_args import ENGINE_ARGS, FRONTEND_ARGS, VLLM_VERSION


def public_fields(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls) if not f.name.startswith("_")}


def test_the_pinned_vllm_is_the_one_the_names_were_taken_from() -> None:
    assert vllm.__version__ == VLLM_VERSION


def test_engine_argument_names_match_the_installed_vllm() -> None:
    assert public_fields(AsyncEngineArgs) == ENGINE_ARGS


def test_frontend_argument_names_match_the_installed_vllm() -> None:
    assert public_fields(FrontendArgs) == FRONTEND_ARGS
