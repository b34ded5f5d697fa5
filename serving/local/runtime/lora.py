"""A profile's LoRA adapters, served by vLLM's CPU build in a local run: tiny adapters of the same
names and ranks (`serving.local.engine.tiny_adapters`) on the tiny model, in place of the
profile's own.

Under direct streaming the compiler already serves the adapters as vLLM's static `lora_modules`,
named `base:adapter` and read from the weights bucket's mount in a worker pod
(`serving.compile.lora` says why Ray's loader cannot serve them there): a local run keeps each
compiled module, its name included, and points its path at the tiny adapter of that name. A run
asked to serve adapters its profile does not name (`local_serve(adapters=...)`) gets modules of
the same form. Ray's `lora_config`, which the compiler emits only off direct streaming, is left
out: every replica lists its cloud folder as its engine starts, and a local run cannot reach it
(measured: against an unreachable bucket the replica never became ready in 8 minutes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from serving.local.engine.tiny_adapters import tiny_adapter
from serving.local.engine.tiny_models import Family
from serving.spec.lora import adapter_model_id

# vLLM 0.22's accepted max_lora_rank values (vllm/config/lora.py MaxLoRARanks).
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


@dataclass(frozen=True)
class LocalAdapter:
    """One adapter a local run serves: its name (the part after `base:`) and rank."""

    name: str
    rank: int


class LocalLoraError(ValueError):
    """A profile's adapters cannot be served as configured locally."""


def profile_adapters(spec: Any) -> tuple[LocalAdapter, ...]:
    """The profile's adapters, none when it has no `lora` section."""
    lora = getattr(spec, "lora", None)
    if lora is None:
        return ()
    return tuple(LocalAdapter(adapter.name, int(adapter.rank)) for adapter in lora.adapters)


def lora_engine_kwargs(adapters: Sequence[LocalAdapter]) -> dict[str, Any]:
    """What vLLM needs to serve the adapters when the compiled arguments do not say: LoRA on,
    a maximum rank vLLM accepts that covers every adapter, one GPU slot per adapter."""
    highest = max(adapter.rank for adapter in adapters)
    rank = next((r for r in VLLM_LORA_RANKS if r >= highest), None)
    if rank is None:
        raise LocalLoraError(
            f"adapter rank {highest} is above vLLM 0.22's largest max_lora_rank "
            f"({VLLM_LORA_RANKS[-1]}): use a rank of at most {VLLM_LORA_RANKS[-1]}"
        )
    return {
        "enable_lora": True,
        "max_lora_rank": rank,
        "max_loras": len(adapters),
        "max_cpu_loras": len(adapters),
    }


def require_direct_streaming(adapters: Sequence[LocalAdapter], direct_streaming: bool) -> None:
    """Refused where the local run could not serve the adapters: off direct streaming, Ray's own
    loader would fetch each from `lora_config.dynamic_lora_loading_path` (cloud storage) on its
    first request, whichever engine runs."""
    if adapters and not direct_streaming:
        raise LocalLoraError(
            "a local run serves LoRA adapters only with direct streaming on (fast_paths."
            "direct_streaming: true): without it Ray Serve loads each adapter from its cloud "
            "path, which a local run cannot reach"
        )


def serve_adapters(
    config: dict[str, Any],
    adapters: Sequence[LocalAdapter],
    family: Family,
    *,
    direct_streaming: bool,
) -> None:
    """One LLMConfig made to serve the adapters from tiny ones made here. Refused where the
    local run could not serve them: off direct streaming, Ray's own loader would fetch each
    adapter from `lora_config.dynamic_lora_loading_path` (cloud storage) on its first request."""
    if not adapters:
        return
    require_direct_streaming(adapters, direct_streaming)
    names = [adapter.name for adapter in adapters]
    if len(set(names)) != len(names):
        raise LocalLoraError(f"adapter names must be unique, got {names}")
    config.pop("lora_config", None)  # a cloud path nothing here can read (see above)
    model_id = config["model_loading_config"]["model_id"]
    kwargs = config.setdefault("engine_kwargs", {})
    for key, value in lora_engine_kwargs(adapters).items():
        kwargs.setdefault(key, value)
    by_id = {adapter_model_id(model_id, adapter.name): adapter for adapter in adapters}
    compiled = kwargs.get("lora_modules") or [
        {"name": served, "base_model_name": model_id, "is_3d_lora_weight": False}
        for served in by_id
    ]
    served = [module["name"] for module in compiled]
    if sorted(served) != sorted(by_id):
        raise LocalLoraError(
            f"the compiled application serves the adapters {served}, the local run was asked "
            f"for {sorted(by_id)}: serve the profile's own adapters (no adapters argument)"
        )
    modules = []
    for module in compiled:
        adapter = by_id[module["name"]]
        modules.append(module | {"path": str(tiny_adapter(family, adapter.name, adapter.rank))})
    kwargs["lora_modules"] = modules
