"""What a profile may add to what the compiler derives: vLLM `engine_args` and the
application's `env`, each checked so it cannot contradict a profile field, replace what
servestack sets, or carry a secret into the Serve config (stored in plaintext)."""

from __future__ import annotations

import re
from typing import Any

from serving.catalog.environment import RAYLLM_VLLM_ENGINE_CLS
from serving.catalog.fast_paths import CLUSTER_ENV_NAMES
from serving.catalog.pins import VLLM as VLLM_VERSION
from serving.catalog.vllm_args import ENGINE_ARGS, FRONTEND_ARGS
from serving.errors import FixableValueError, unknown_key_fix
from serving.spec.secrets import find_credentials, looks_secret

_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
SECRETS_FIX = (
    "keep secrets out of profiles: the Hugging Face token is a Pulumi secret "
    "(pulumi config set --secret servestack:hf_token ...) that reaches pods as a Kubernetes Secret"
)

# Engine arguments the compiler derives from profile fields: setting them in `engine_args` too
# would give two answers to one question.
DERIVED_ENGINE_ARGS = {
    "tensor_parallel_size": "parallelism.tensor",
    "pipeline_parallel_size": "parallelism.pipeline",
    "data_parallel_size": "parallelism.data",
    "enable_expert_parallel": "parallelism.expert",
    "quantization": "quantization",
    "kv_cache_dtype": "kv_cache_dtype",
    "enable_prefix_caching": "prefix_caching",
    "max_model_len": "max_model_len",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "max_num_seqs": "max_num_seqs",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "kv_transfer_config": "disaggregation",
    "async_scheduling": "fast_paths.ray_v2_executor",
    "enable_chunked_prefill": "max_num_batched_tokens (chunked prefill is always on)",
    "model": "source",
    "served_model_name": "name",
    "distributed_executor_backend": "nothing: Ray Serve LLM always runs vLLM on Ray",
    "enable_lora": "lora",
    "max_loras": "lora.max_loras",
    "max_lora_rank": "lora.max_lora_rank",
    "max_cpu_loras": "lora.max_cpu_loras",
    "lora_modules": "lora.adapters (Ray Serve LLM loads them from lora_config)",
}
# vLLM's own HTTP server settings: Ray Serve and the edge ingress serve HTTP, TLS and API keys,
# and a key or certificate here would sit in plaintext in the Serve config.
EDGE_FRONTEND_ARGS = {
    "api_key", "host", "port", "root_path", "middleware", "allow_credentials", "allowed_headers",
    "allowed_methods", "allowed_origins", "ssl_keyfile", "ssl_certfile", "ssl_ca_certs",
    "ssl_cert_reqs", "ssl_ciphers", "enable_ssl_refresh",
}  # fmt: skip
# What servestack sets in every Ray process itself; a profile's runtime_env would override it.
RESERVED_ENV_NAMES = {
    "PYTHONPATH": "the pods put servestack's request router on it; replacing it breaks routing",
    RAYLLM_VLLM_ENGINE_CLS: "it swaps the engine Ray Serve LLM runs for another class; the "
    "cluster serves with vLLM",
    "HF_HOME": "the pods cache downloaded weights on the node's local SSD there",
}


def check_engine_args(value: dict[str, Any]) -> dict[str, Any]:
    """`engine_args` as given, or the first key vLLM lacks, the compiler derives, configures
    vLLM's own HTTP server, or that holds a secret."""
    for key in value:
        if key in DERIVED_ENGINE_ARGS:
            raise FixableValueError(
                f"{key} is derived from the profile", f"set {DERIVED_ENGINE_ARGS[key]} instead",
                field=key,
            )  # fmt: skip
        if looks_secret(key):
            raise FixableValueError(
                f"{key} is a secret, and engine_args are stored in plaintext in the Serve "
                "config", SECRETS_FIX, field=key,
            )  # fmt: skip
        if key in EDGE_FRONTEND_ARGS:
            raise FixableValueError(
                f"{key} configures vLLM's own HTTP server, which Ray Serve replaces",
                "remove it; TLS, API keys and CORS belong to the edge ingress",
                field=key,
            )
        if key not in ENGINE_ARGS | FRONTEND_ARGS:
            raise FixableValueError(
                f"vLLM {VLLM_VERSION} has no engine argument '{key}'",
                unknown_key_fix(key, ENGINE_ARGS, f"vLLM {VLLM_VERSION} engine arguments"),
                field=key,
            )
    for path, what in find_credentials(value):
        raise FixableValueError(
            f"the value looks like {what}, and engine_args are stored in plaintext in the "
            "Serve config", SECRETS_FIX, field=path,
        )  # fmt: skip
    return value


def env_as_strings(value: Any) -> Any:
    # YAML reads `1` and `true` as numbers and booleans; the environment holds strings.
    if isinstance(value, dict):
        return {
            k: (str(v).lower() if isinstance(v, bool) else str(v))
            if isinstance(v, int | float | bool) else v
            for k, v in value.items()
        }  # fmt: skip
    return value


def check_env(value: dict[str, str]) -> dict[str, str]:
    """`env` as given, or the first name that is no variable, a cluster-wide switch, set by
    servestack itself, or a secret."""
    for name in value:
        if not _ENV_NAME.fullmatch(name):
            raise FixableValueError(
                f"'{name}' is not an environment variable name",
                "use upper-case letters, digits and '_', e.g. VLLM_USE_DEEP_GEMM",
                field=name,
            )
        if name in CLUSTER_ENV_NAMES:
            raise FixableValueError(
                f"{name} is a cluster-wide fast-path switch: Ray reads it on the head and "
                "every worker, not from an application's runtime_env",
                f"set {CLUSTER_ENV_NAMES[name]} in the profile instead",
                field=name,
            )
        if name in RESERVED_ENV_NAMES:
            raise FixableValueError(
                f"{name} is set by servestack: {RESERVED_ENV_NAMES[name]}",
                f"remove {name} from env",
                field=name,
            )
        if looks_secret(name):
            raise FixableValueError(
                f"{name} looks like a secret, and env is stored in plaintext in the Serve config",
                SECRETS_FIX,
                field=name,
            )
    for path, what in find_credentials(value):
        raise FixableValueError(
            f"the value of {path} looks like {what}, and env is stored in plaintext in the "
            "Serve config", SECRETS_FIX, field=path,
        )  # fmt: skip
    return value
