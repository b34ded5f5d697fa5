"""A profile's LoRA adapters, served by vLLM's CPU build in a local run: tiny adapters of the same
names and ranks (`serving.local.engine.tiny_adapters`) on the tiny model, as vLLM's static
`lora_modules`, named `base:adapter` as Ray Serve LLM names them.

Why static modules and not Ray's `lora_config` alone: under direct streaming (Ray 2.56.1) a
request goes from HAProxy straight to vLLM's own OpenAI app on the chosen replica
(`LLMServer.__serve_build_asgi_app__` -> `VLLMEngine.build_asgi_app`, vLLM's `build_app`), and
Ray's LoRA loader runs only in `LLMServer._run_request` (`_maybe_resolve_lora_from_multiplex`),
which that path never calls. vLLM then serves a model name it knows (the base, or a LoRA it has
registered: `OpenAIServing._check_model`) and answers 404 to any other. Ray passes
`lora_modules` through (a FrontendArgs field: `VLLMEngineConfig` splits engine_kwargs by
dataclass fields; `_dict_to_namespace` makes each entry the attributes
`OpenAIServingModels.init_static_loras` reads), so vLLM registers each adapter at start, lists
it in /v1/models, and loads its weights into its LoRA slots (`max_loras`, `max_cpu_loras`,
least recently used out) when a request names it.

Ray's `lora_config` itself is left out of a local run: its `dynamic_lora_loading_path` is cloud
storage, and every replica lists that folder as its engine starts, even under direct streaming
(`LLMServer._start_engine` -> `push_telemetry_report_for_all_models` -> `get_lora_model_ids`, on
the replica's event loop, ray/llm/_internal/serve/observability/usage_telemetry/usage.py).
Measured here: against a bucket the machine cannot reach, the replica never became ready (8
minutes, pyarrow's GCS client retrying).

The interface this reads from the profile (issue 33's `lora:` section, another module's): the
spec's `lora` is None or has `adapters`, each with `name` and `rank`; the compiled LLMConfig's
engine arguments carry vLLM's `enable_lora`, `max_lora_rank`, `max_loras`, `max_cpu_loras`.
Where those are missing, `lora_engine_kwargs` gives the engine what the adapters need.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from serving.local.engine.tiny_adapters import tiny_adapter
from serving.local.engine.tiny_models import Family

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
    if not direct_streaming:
        raise LocalLoraError(
            "a local run serves LoRA adapters only with direct streaming on (fast_paths."
            "direct_streaming: true): without it Ray Serve loads each adapter from its cloud "
            "path, which a local run cannot reach"
        )
    names = [adapter.name for adapter in adapters]
    if len(set(names)) != len(names):
        raise LocalLoraError(f"adapter names must be unique, got {names}")
    config.pop("lora_config", None)  # a cloud path nothing here can read (see above)
    model_id = config["model_loading_config"]["model_id"]
    kwargs = config.setdefault("engine_kwargs", {})
    for key, value in lora_engine_kwargs(adapters).items():
        kwargs.setdefault(key, value)
    kwargs["lora_modules"] = [
        {
            "name": f"{model_id}:{adapter.name}",
            "path": str(tiny_adapter(family, adapter.name, adapter.rank)),
            "base_model_name": model_id,
            "is_3d_lora_weight": False,
        }
        for adapter in adapters
    ]
