"""A profile's LoRA adapters in the LLMConfig: vLLM 0.22's LoRA engine arguments, and how the
adapters reach the engine, which depends on the request path Ray Serve LLM 2.56.1 takes.

Under direct streaming (servestack's default) a request goes from HAProxy straight to vLLM's own
OpenAI app on the chosen replica (`ray/serve/_private/haproxy_templates.py:107-137`,
`ray/llm/_internal/serve/core/server/llm_server.py:200-222`; the app is
`VLLMEngine.build_asgi_app`, `engines/vllm/vllm_engine.py:270-284`, vLLM's `build_app` and
`init_app_state`). Ray's adapter loader runs only on the handle path (`llm_server.py:305-312,
350`), which that request never takes: vLLM knows an adapter only from its static
`lora_modules` (`vllm/entrypoints/openai/models/serving.py:117-132`), serves those and lists them
in /v1/models (`serving.py:142-157`), and answers 404 to any other model id. Measured on the CPU
build (issue 33): with Ray's `lora_config` alone every `base:adapter` got vLLM's 404; with
`lora_modules` both adapters answered and were listed. So there the compiler emits:

- `lora_modules`, one per adapter, named `<model>:<adapter>` (the id a client sends,
  `serving.spec.lora.adapter_model_id`), read from the adapter's folder on the GCS FUSE mount of
  the weights bucket (`serving.compile.weights`; the spec keeps every adapter in that bucket,
  which each worker pod mounts whole and read-only). Ray passes the list through: `lora_modules`
  is a field of vLLM's FrontendArgs (`engines/vllm/vllm_models.py:195-212` splits engine kwargs
  by those fields) and `_dict_to_namespace` (`vllm_engine.py:119-126,334`) makes each entry the
  attributes `init_static_loras` reads, so each entry carries every field of vLLM's
  `LoRAModulePath` (name, path, base_model_name, is_3d_lora_weight). vLLM loads each at start
  and a replica fails to start on one it cannot read (`init_static_loras` raises): a missing
  adapter is found at rollout, not by a client. The adapters are fixed at deploy time.
- no `lora_config`: with `dynamic_lora_loading_path` set, every replica lists that folder as its
  engine starts, synchronously (`llm_server.py:276` -> `observability/usage_telemetry/usage.py:
  299` -> `lora_utils.py:205`); an unreadable path hangs the replica for ever (measured: 8
  minutes, never ready), and nothing under direct streaming would use what it found.

Off direct streaming, Serve's ingress names the adapter as the multiplexed model id
(`core/ingress/ingress.py:285-325`) and Ray's loader serves it from `lora_config`: the one gs://
folder every adapter is a subfolder of, named after it (`serving.spec.lora`). Ray loads
`<base>:<adapter>` from `<path>/<adapter>` (`serve/utils/lora_serve_utils.py:67-83`) and
`/v1/models` lists the base and every subfolder holding an `adapter_config.json`
(`ingress.py:406-451`): the folder should hold the profile's adapters only.
`max_num_adapters_per_replica` is Serve's multiplexing bound (`llm_config.py:560-570`,
`ray/serve/multiplex.py`), set to vLLM's `max_cpu_loras` so both evict together.

servestack's adapter-aware routers (`serving.router.adapters`) are told, in their
`request_router_kwargs`, how many adapters a replica's engine keeps (`adapters_per_replica`,
vLLM's `max_cpu_loras`: past it the engine evicts the least recently used, and so does the
router's picture of it) and the profile's adapter names (`adapters`, the only labels the
router's per-adapter metric takes; any other name is counted as 'other').

vLLM's `enable_lora`, `max_loras` (adapters mixed in one step, each with a GPU slot),
`max_lora_rank` and `max_cpu_loras` (`vllm/engine/arg_utils.py:581-591`) go in on both paths
(Ray's own config generator sets the same, `config_generator/generator.py:98-112`).
"""

from __future__ import annotations

from typing import Any

from serving.compile.weights import mounted_path
from serving.spec.lora import adapter_model_id
from serving.spec.parts import ADAPTER_AWARE_ROUTERS
from serving.spec.profile import ModelSpec


def lora_config(spec: ModelSpec) -> dict[str, Any] | None:
    """Ray's `LLMConfig.lora_config` for the profile's adapters: off direct streaming only
    (the module says why); None without adapters."""
    if spec.lora is None or spec.fast_paths.direct_streaming:
        return None
    return {
        "dynamic_lora_loading_path": spec.lora.loading_path,
        "max_num_adapters_per_replica": spec.lora.cpu_loras,
    }


def lora_modules(spec: ModelSpec) -> list[dict[str, Any]]:
    """vLLM's static `lora_modules`, one per adapter, each with every field of its
    `LoRAModulePath`; none without adapters."""
    if spec.lora is None:
        return []
    return [
        {
            "name": adapter_model_id(spec.name, adapter.name),
            "path": mounted_path(adapter.source),
            "base_model_name": spec.name,
            "is_3d_lora_weight": False,
        }
        for adapter in spec.lora.adapters
    ]


def lora_engine_kwargs(spec: ModelSpec) -> dict[str, Any]:
    """vLLM's LoRA engine arguments, with the static adapters under direct streaming; none
    without adapters."""
    if spec.lora is None:
        return {}
    kwargs: dict[str, Any] = {
        "enable_lora": True,
        "max_loras": spec.lora.max_loras,
        "max_lora_rank": spec.lora.max_lora_rank,
        "max_cpu_loras": spec.lora.cpu_loras,
    }
    if spec.fast_paths.direct_streaming:
        kwargs["lora_modules"] = lora_modules(spec)
    return kwargs


def lora_router_kwargs(spec: ModelSpec) -> dict[str, Any]:
    """What an adapter-aware router's `initialize_state` takes about the adapters; none for
    other routers (Ray's would refuse the arguments) or without adapters."""
    if spec.lora is None or spec.router.kind not in ADAPTER_AWARE_ROUTERS:
        return {}
    return {
        "adapters_per_replica": spec.lora.cpu_loras,
        "adapters": [adapter.name for adapter in spec.lora.adapters],
    }
