"""A local run's LoRA adapters: each served by vLLM as a static module named `base:adapter` from a
tiny adapter made here; the engine's LoRA settings cover the adapters' ranks; refused where the
local run could not serve them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from compiled_support import compile_spec
from repo import REPO

from serving.compile.patterns import llm_configs_of
from serving.local.runtime import lora
from serving.local.runtime.app import local_application
from serving.local.runtime.lora import LocalAdapter, LocalLoraError, lora_engine_kwargs
from serving.spec.loading import load_profile
from serving.spec.profile import ModelSpec

LLAMA = REPO / "stacks/models/llama-3.1-8b.yaml"
LORA = REPO / "stacks/models/llama-3.1-8b-lora.yaml"
ADAPTERS = (LocalAdapter("support", 8), LocalAdapter("legal", 12))


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[tuple[str, str, int]]:
    """The adapters the run asks to be made, each given a directory of its own."""
    asked: list[tuple[str, str, int]] = []

    def tiny_adapter(family: str, name: str, rank: int) -> Path:
        asked.append((family, name, rank))
        return tmp_path / name

    monkeypatch.setattr(lora, "tiny_adapter", tiny_adapter)
    return asked


def served_config(spec: ModelSpec, tmp_path: Path) -> dict[str, Any]:
    app = local_application(compile_spec(spec), "vllm", tmp_path, ADAPTERS)
    config: dict[str, Any] = app["args"]["llm_configs"][0]
    return config


def test_each_adapter_is_a_static_module_named_base_colon_adapter(
    made: list[tuple[str, str, int]], tmp_path: Path
) -> None:
    config = served_config(load_profile(LLAMA), tmp_path)
    kwargs = config["engine_kwargs"]
    assert kwargs["lora_modules"] == [
        {"name": "llama-3.1-8b:support", "path": str(tmp_path / "support"),
         "base_model_name": "llama-3.1-8b", "is_3d_lora_weight": False},
        {"name": "llama-3.1-8b:legal", "path": str(tmp_path / "legal"),
         "base_model_name": "llama-3.1-8b", "is_3d_lora_weight": False},
    ]  # fmt: skip
    assert made == [("llama", "support", 8), ("llama", "legal", 12)]
    # rank 12 needs vLLM's next allowed maximum, 16; one slot per adapter
    assert (kwargs["enable_lora"], kwargs["max_lora_rank"], kwargs["max_loras"]) == (True, 16, 2)


def test_a_lora_profiles_compiled_modules_read_tiny_adapters_of_their_names(
    made: list[tuple[str, str, int]], tmp_path: Path
) -> None:
    """What the cluster would serve, names and LoRA settings as compiled; only each module's
    path (the weights bucket's mount) points at the tiny adapter of that name and rank."""
    spec = load_profile(LORA)
    assert spec.lora is not None
    compiled = compile_spec(spec)
    (cluster,) = [c for _, c in llm_configs_of(compiled.application["args"])]
    (local,) = [c for _, c in llm_configs_of(local_application(compiled, "vllm", tmp_path)["args"])]
    ours, theirs = local["engine_kwargs"], cluster["engine_kwargs"]
    assert len(ours["lora_modules"]) == len(theirs["lora_modules"]) == len(spec.lora.adapters)
    for module, compiled_module, adapter in zip(
        ours["lora_modules"], theirs["lora_modules"], spec.lora.adapters, strict=True
    ):
        assert module == compiled_module | {"path": str(tmp_path / adapter.name)}
    assert made == [("llama", a.name, a.rank) for a in spec.lora.adapters]
    for key in ("enable_lora", "max_loras", "max_lora_rank", "max_cpu_loras"):
        assert ours[key] == theirs[key], key


def test_adapters_other_than_the_compiled_ones_are_refused(
    made: list[tuple[str, str, int]], tmp_path: Path
) -> None:
    with pytest.raises(LocalLoraError, match="the compiled application serves the adapters"):
        local_application(compile_spec(load_profile(LORA)), "vllm", tmp_path, ADAPTERS)


def test_rays_lora_config_stays_out_of_a_local_run(
    made: list[tuple[str, str, int]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every replica lists Ray's adapter folder (cloud storage) as its engine starts; a local
    run cannot reach it and would never become ready."""
    compiled = compile_spec(load_profile(LLAMA))
    (config,) = [c for _, c in llm_configs_of(compiled.application["args"])]
    monkeypatch.setitem(config, "lora_config", {"dynamic_lora_loading_path": "gs://b/a"})
    app = local_application(compiled, "vllm", tmp_path, ADAPTERS)
    assert "lora_config" not in app["args"]["llm_configs"][0]


def test_a_profile_without_adapters_serves_none(tmp_path: Path) -> None:
    app = local_application(compile_spec(load_profile(LLAMA)), "vllm", tmp_path)
    assert "lora_modules" not in app["args"]["llm_configs"][0]["engine_kwargs"]


def test_off_direct_streaming_the_local_run_refuses_adapters(
    made: list[tuple[str, str, int]], tmp_path: Path
) -> None:
    profile = load_profile(LLAMA)
    spec = ModelSpec.model_validate(
        profile.model_dump() | {"fast_paths": {"haproxy": True, "direct_streaming": False}}
    )
    with pytest.raises(LocalLoraError, match="direct_streaming: true"):
        served_config(spec, tmp_path)
    assert made == []


def test_a_rank_above_vllms_largest_is_refused() -> None:
    assert lora_engine_kwargs([LocalAdapter("a", 512)])["max_lora_rank"] == 512
    with pytest.raises(LocalLoraError, match="at most 512"):
        lora_engine_kwargs([LocalAdapter("a", 513)])


def test_a_real_engine_run_starts_every_process_with_the_unpinned_lora_mapping() -> None:
    """vLLM 0.22 pins memory for LoRA's index mapping even on the CPU, which fails without a
    CUDA driver: every process of a real-engine run (PYTHONPATH) loads the startup hook that
    rebinds it."""
    import os
    import subprocess
    import sys

    from serving.local.runtime.app import CPU_STARTUP_DIR
    from serving.local.runtime.local_ray import run_env
    from serving.local.runtime.ports import RunPorts

    compiled = compile_spec(load_profile(LLAMA))
    ports = RunPorts(40000, 40001, 40002, 40003, 40004)
    real = run_env(compiled, None, Path("/nonexistent"), ports, "vllm")["PYTHONPATH"]
    assert real.split(":")[0] == str(CPU_STARTUP_DIR)
    probe = (
        "import vllm.lora.punica_wrapper.utils as u, functools; "
        "f = u.async_tensor_h2d; "
        "print(isinstance(f, functools.partial) and f.keywords == {'pin_memory': False})"
    )
    ran = subprocess.run(
        [sys.executable, "-c", probe], env=os.environ | {"PYTHONPATH": real}, capture_output=True,
        text=True, timeout=300, check=True,
    )  # fmt: skip
    assert ran.stdout.strip().endswith("True"), ran.stderr[-2000:]
