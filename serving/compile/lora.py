"""A profile's LoRA adapters in the LLMConfig: Ray Serve LLM 2.56.1's `lora_config` and vLLM
0.22's LoRA engine arguments.

- `lora_config.dynamic_lora_loading_path` is the one gs:// folder the spec checked every adapter
  is a subfolder of, named after it (`serving.spec.lora`): Ray loads `<base>:<adapter>` from
  `<path>/<adapter>` (`ray/llm/_internal/serve/utils/lora_serve_utils.py:67-83`), and
  `/v1/models` lists the base and every subfolder holding an `adapter_config.json`
  (`ray/llm/_internal/serve/core/ingress/ingress.py:406-451`). So every adapter of the profile is
  listed, and so is any other subfolder put there: the folder should hold the profile's adapters
  only.
- `max_num_adapters_per_replica` is Serve's multiplexing bound, the adapters a replica keeps
  loaded and reports holding (`llm_config.py:560-570`, `ray/serve/multiplex.py`); it is vLLM's
  `max_cpu_loras`, the adapters a worker keeps in CPU memory, so both evict together.
- vLLM: `enable_lora`, `max_loras` (adapters mixed in one step, each with a GPU slot),
  `max_lora_rank` and `max_cpu_loras` (`vllm/engine/arg_utils.py:581-591`). Ray passes them
  through as engine arguments (`ray/llm/_internal/serve/engines/vllm/vllm_models.py:182-225`); its
  own config generator sets the same three (`config_generator/generator.py:98-112`).

Not settled by reading alone (the real-engine run of issue 33 decides): under direct streaming a
POST goes from HAProxy straight to the replica's vLLM app (`ray/serve/_private/
haproxy_templates.py:107-137`, `llm_server.py:200-222`), which `VLLMEngine.build_asgi_app`
builds with its own `init_app_state` (`engines/vllm/vllm_engine.py:270-284`). Ray's adapter
loading runs only on the handle path (`llm_server.py:305-312,350`), into another
`OpenAIServingModels`; vLLM's app knows an adapter only from its static `lora_modules` or a
runtime resolver (`vllm/entrypoints/openai/engine/serving.py:218-246`), and its `/v1/models`
lists only those (`vllm/entrypoints/openai/models/serving.py:142-157`).
"""

from __future__ import annotations

from typing import Any

from serving.spec.profile import ModelSpec


def lora_config(spec: ModelSpec) -> dict[str, Any] | None:
    """Ray's `LLMConfig.lora_config` for the profile's adapters; None without adapters."""
    if spec.lora is None:
        return None
    return {
        "dynamic_lora_loading_path": spec.lora.loading_path,
        "max_num_adapters_per_replica": spec.lora.cpu_loras,
    }


def lora_engine_kwargs(spec: ModelSpec) -> dict[str, Any]:
    """vLLM's LoRA engine arguments; none without adapters."""
    if spec.lora is None:
        return {}
    return {
        "enable_lora": True,
        "max_loras": spec.lora.max_loras,
        "max_lora_rank": spec.lora.max_lora_rank,
        "max_cpu_loras": spec.lora.cpu_loras,
    }
