"""The model deployment spec: one YAML profile per model, parsed into one frozen, typed object.

The spec holds what the user chose. It rejects what is malformed or impossible on its face (an
unknown key, tensor=0, a context longer than the model supports); a layout that is well-formed
but wasteful or unworkable (TP across nodes, a model that does not fit) is the planner's verdict,
so that policies can judge the same layout the program would deploy.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from serving import catalog
from serving.catalog import Accelerator, Architecture, MachineType
from serving.catalog.pins import VLLM as VLLM_VERSION
from serving.errors import FixableValueError
from serving.frozen import StrictFrozen
from serving.spec import overrides
from serving.spec.lora import Lora, adapter_model_id
from serving.spec.names import kubernetes_name_problem
from serving.spec.parts import (
    Autoscaling,
    FastPaths,
    LatencyTargets,
    Parallelism,
    Router,
    Workload,
)
from serving.spec.sources import GCS_SCHEME
from serving.spec.sources import HF_REPO as _HF_REPO

Quantization = Literal["none", "fp8", "fp8_online"]
KvCacheDtype = Literal["auto", "fp8"]
Placement = Literal["auto", "STRICT_PACK", "PACK", "SPREAD", "STRICT_SPREAD"]

# The blocks of Qwen's and DeepSeek's FP8 releases (quantization_config.weight_block_size), the
# strictest scaling vLLM loads: an FP8 checkpoint servestack has not read is judged by them.
FP8_RELEASE_BLOCK = (128, 128)
_SERVED_NAME = re.compile(r"^[a-z0-9]([a-z0-9.-]{0,50}[a-z0-9])?$")
_GCS_PATH = re.compile(rf"^{re.escape(GCS_SCHEME)}[a-z0-9][a-z0-9._-]{{1,221}}[a-z0-9](/[^\s]*)?$")


class DisaggregatedRole(StrictFrozen):
    """One side of a prefill/decode pair. Both sides serve the profile's model."""

    parallelism: Parallelism | None = Field(
        default=None, description="Overrides the profile's parallelism for this role."
    )
    autoscaling: Autoscaling = Field(
        default_factory=Autoscaling, description="Replica bounds of this role."
    )

    @model_validator(mode="before")
    @classmethod
    def _one_model(cls, value: Any) -> Any:
        if isinstance(value, dict):
            model_keys = sorted(set(value) & (set(ModelSpec.model_fields) - set(cls.model_fields)))
            if model_keys:
                raise FixableValueError(
                    f"{', '.join(model_keys)} cannot differ between prefill and decode: Ray's "
                    "build_pd_openai_app serves one model id on both sides",
                    f"set {', '.join(model_keys)} once at the top of the profile; a role "
                    "takes only parallelism and autoscaling",
                )
        return value


class Disaggregation(StrictFrozen):
    """Prefill/decode disaggregation: two replica groups joined by a KV-cache transfer."""

    prefill: DisaggregatedRole = Field(
        default_factory=DisaggregatedRole, description="The replicas that compute prompts."
    )
    decode: DisaggregatedRole = Field(
        default_factory=DisaggregatedRole, description="The replicas that generate tokens."
    )
    kv_connector: Literal["NixlConnector"] = Field(
        default="NixlConnector", description="vLLM's KV transfer between prefill and decode."
    )


class ModelSpec(StrictFrozen):
    """One model profile (`stacks/models/<name>.yaml`)."""

    name: str = Field(
        description="Served model id, e.g. 'llama-3.1-8b' (lower case, digits, '.', '-')."
    )
    source: str = Field(description="A Hugging Face repo ('org/name') or a gs:// path to weights.")
    architecture: Architecture = Field(
        description="A catalog key such as 'llama-3.3-70b', or the architecture's fields inline."
    )
    quantization: Quantization = Field(
        default="none",
        description="none: as published; fp8: an FP8 checkpoint (judged as scaled in "
        "128x128 blocks; import its config.json for its own); fp8_online: quantize at load.",
    )
    kv_cache_dtype: KvCacheDtype = Field(
        default="auto",
        description="auto: the model's dtype; fp8: half the KV bytes, on GPUs with FP8 math.",
    )
    accelerator: str = Field(description="Accelerator catalog key, e.g. 'h100-80gb'.")
    machine_type: str | None = Field(
        default=None, description="GCE machine type; by default the smallest that holds a replica."
    )
    parallelism: Parallelism = Field(
        default_factory=Parallelism, description="How one replica is split over GPUs."
    )
    max_model_len: int = Field(ge=16, description="Longest sequence (prompt + output) served.")
    max_num_batched_tokens: int = Field(
        default=8192, ge=16, le=2**24, description="Chunked-prefill token budget per engine step."
    )
    max_num_seqs: int = Field(default=256, ge=1, le=4096, description="Sequences per engine step.")
    gpu_memory_utilization: float = Field(
        default=0.9, gt=0.1, le=0.98, description="Share of each GPU's memory vLLM may take."
    )
    prefix_caching: bool = Field(
        default=True, description="vLLM's automatic prefix caching (the prefix routers need it)."
    )
    placement: Placement = Field(
        default="auto",
        description="Ray placement strategy of a replica's GPUs. auto: STRICT_PACK inside a "
        "node, PACK across nodes; anything else is for experiments, and the policy pack judges it.",
    )
    router: Router = Field(
        default_factory=Router, description="How Ray Serve picks a replica for a request."
    )
    disaggregation: Disaggregation | None = Field(
        default=None, description="Prefill/decode disaggregation; unset, one replica does both."
    )
    autoscaling: Autoscaling = Field(
        default_factory=Autoscaling, description="Replica bounds and Serve's autoscaling knobs."
    )
    workload: Workload = Field(
        default_factory=Workload, description="The typical request, for the plan's estimates."
    )
    latency: LatencyTargets = Field(
        default_factory=LatencyTargets, description="p99 latency targets the model is served to."
    )
    fast_paths: FastPaths = Field(
        default_factory=FastPaths, description="Ray 2.56 fast paths, all on by default."
    )
    lora: Lora | None = Field(
        default=None,
        description="LoRA adapters served on this model, each as '<name>:<adapter>'; unset, none.",
    )
    engine_args: dict[str, Any] = Field(
        default_factory=dict,
        description=f"Further vLLM {VLLM_VERSION} engine arguments, e.g. all2all_backend.",
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Non-secret environment for this model's replicas (Ray runtime_env).",
    )

    @field_validator("name")
    @classmethod
    def _served_name(cls, value: str) -> str:
        if not _SERVED_NAME.fullmatch(value):
            raise FixableValueError(
                f"'{value}' is not a served model id",
                "use lower-case letters, digits, '.' and '-', starting and ending with a letter or "
                "digit, e.g. 'llama-3.1-8b'",
            )
        problem = kubernetes_name_problem(value)
        if problem is not None:
            raise problem
        return value

    @field_validator("source")
    @classmethod
    def _source(cls, value: str) -> str:
        if value.startswith(GCS_SCHEME):
            if not _GCS_PATH.fullmatch(value):
                raise FixableValueError(
                    f"'{value}' is not a valid gs:// path", "use gs://<bucket>/<path to weights>"
                )
        elif not _HF_REPO.fullmatch(value):
            raise FixableValueError(
                f"'{value}' is neither a Hugging Face repo nor a gs:// path",
                "use 'org/model' (e.g. meta-llama/Llama-3.1-8B-Instruct) or gs://bucket/path",
            )
        return value

    @field_validator("architecture", mode="before")
    @classmethod
    def _architecture_from_catalog(cls, value: Any) -> Any:
        return catalog.architecture(value) if isinstance(value, str) else value

    @field_validator("accelerator")
    @classmethod
    def _known_accelerator(cls, value: str) -> str:
        catalog.accelerator(value)
        return value

    @field_validator("machine_type")
    @classmethod
    def _known_machine_type(cls, value: str | None) -> str | None:
        if value is not None:
            catalog.machine_type(value)
        return value

    @field_validator("engine_args")
    @classmethod
    def _known_engine_args(cls, value: dict[str, Any]) -> dict[str, Any]:
        return overrides.check_engine_args(value)

    @field_validator("env", mode="before")
    @classmethod
    def _env_as_strings(cls, value: Any) -> Any:
        return overrides.env_as_strings(value)

    @field_validator("env")
    @classmethod
    def _safe_env(cls, value: dict[str, str]) -> dict[str, str]:
        return overrides.check_env(value)

    @model_validator(mode="after")
    def _consistent(self) -> ModelSpec:
        arch = self.architecture
        if self.max_model_len > arch.max_position_embeddings:
            raise FixableValueError(
                f"max_model_len {self.max_model_len:,} is beyond {arch.key}'s "
                f"{arch.max_position_embeddings:,} positions",
                f"set max_model_len to at most {arch.max_position_embeddings}",
                field="max_model_len",
            )
        if self.machine_type and self.machine.accelerator != self.accelerator:
            carriers = ", ".join(m.name for m in catalog.machines_for(self.accelerator))
            raise FixableValueError(
                f"machine type {self.machine_type} carries {self.machine.accelerator}, "
                f"not {self.accelerator}",
                f"use one of {carriers}, or drop machine_type to let the planner choose",
                field="machine_type",
            )
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise FixableValueError(
                f"max_num_batched_tokens ({self.max_num_batched_tokens}) is below max_num_seqs "
                f"({self.max_num_seqs}); vLLM needs a token per running sequence each step",
                f"raise max_num_batched_tokens to at least {self.max_num_seqs}",
                field="max_num_batched_tokens",
            )
        if self.workload.input_tokens + self.workload.output_tokens > self.max_model_len:
            raise FixableValueError(
                f"the workload's {self.workload.input_tokens} + {self.workload.output_tokens} "
                f"tokens exceed max_model_len {self.max_model_len}",
                "shorten the workload or raise max_model_len",
                field="workload",
            )
        if self.workload.prefix_cache_hit_rate and not self.prefix_caching:
            raise FixableValueError(
                f"the workload expects a prefix-cache hit rate of "
                f"{self.workload.prefix_cache_hit_rate:g} with prefix_caching off",
                "set prefix_caching: true, or drop workload.prefix_cache_hit_rate",
                field="workload.prefix_cache_hit_rate",
            )
        if self.quantization != "none" and arch.weight_dtype != "bf16":
            raise FixableValueError(
                f"{arch.key} is published in {arch.weight_dtype}; there is nothing to quantize "
                f"to {self.quantization}",
                "set quantization: none",
                field="quantization",
            )
        if self.kv_cache_dtype == "fp8" and not self.gpu.has_fp8_math:
            raise FixableValueError(
                f"{self.accelerator} has no FP8 tensor cores: vLLM would keep an FP8 KV cache "
                "there only by converting it on every attention step",
                f"set kv_cache_dtype: auto, or use {' / '.join(catalog.FP8_ACCELERATORS)}",
                field="kv_cache_dtype",
            )
        if self.lora is not None:
            self._lora_consistent(self.lora)
        if self.disaggregation is not None and self.parallelism.data > 1:
            raise FixableValueError(
                "prefill/decode disaggregation with data-parallel groups is not supported",
                "set parallelism.data: 1, or drop disaggregation",
                field="disaggregation",
            )
        return self

    def _lora_consistent(self, lora: Lora) -> None:
        arch = self.architecture
        if arch.is_moe or arch.attention != "gqa" or arch.attention_layers is not None:
            raise FixableValueError(
                f"{arch.key} has expert, MLA or linear-attention layers, whose LoRA weights "
                "servestack's planner does not lay out (it would underestimate their memory)",
                "serve LoRA adapters on a dense attention model, or drop lora",
                field="lora",
            )
        if self.disaggregation is not None:
            raise FixableValueError(
                "LoRA adapters with prefill/decode disaggregation: both sides would have to "
                "load each adapter, and Ray 2.56's P/D builder routes no adapter to them",
                "drop lora, or drop disaggregation",
                field="lora",
            )
        # Ray reads gs:// adapters with the credentials of the model's pods: the weights
        # account, which is granted the weights bucket and nothing else.
        weights_bucket = (
            self.source.removeprefix(GCS_SCHEME).partition("/")[0] if self.weights_on_gcs else None
        )
        for index, adapter in enumerate(lora.adapters):
            if adapter.bucket is not None and adapter.bucket != weights_bucket:
                readable = (
                    f"{GCS_SCHEME}{weights_bucket}/..."
                    if weights_bucket
                    else "no bucket (its weights "
                    "come from Hugging Face, so it has no weights account)"
                )
                raise FixableValueError(
                    f"adapter '{adapter.name}' is in gs://{adapter.bucket}, which the model's "
                    f"weights account does not read; it reads {readable}",
                    "put the adapter in the bucket of the model's own weights (gs:// source), "
                    "so that one account, the model's, reads both",
                    field=f"lora.adapters.{index}.source",
                )

    @property
    def weights_on_gcs(self) -> bool:
        """The weights are read from a Cloud Storage bucket (GCS FUSE), not the Hugging Face Hub:
        the one test of it every stage asks."""
        return self.source.startswith(GCS_SCHEME)

    @property
    def adapter_model_ids(self) -> list[str]:
        """The model id a client names each LoRA adapter by (`<name>:<adapter>`), in order."""
        if self.lora is None:
            return []
        return [adapter_model_id(self.name, adapter.name) for adapter in self.lora.adapters]

    @property
    def gpu(self) -> Accelerator:
        return catalog.ACCELERATORS[self.accelerator]

    @property
    def machine(self) -> MachineType:
        """The machine type the profile names (only valid when it names one)."""
        assert self.machine_type is not None
        return catalog.MACHINE_TYPES[self.machine_type]

    @property
    def weights_dtype(self) -> str:
        """Dtype of the non-embedding weights as served."""
        if self.quantization in ("fp8", "fp8_online"):
            return "fp8"
        return self.architecture.weight_dtype

    @property
    def weight_block(self) -> tuple[int, int] | None:
        """The [rows, columns] blocks the FP8 weights are scaled in as served: the
        architecture's, read from its config.json; for `quantization: fp8` (an FP8 checkpoint of
        a BF16 architecture, whose config servestack has not read) FP8_RELEASE_BLOCK, so a
        layout it might refuse is refused; none for `fp8_online`, which vLLM quantizes per
        tensor at load."""
        if self.quantization == "fp8":
            return FP8_RELEASE_BLOCK
        return self.architecture.weight_block if self.quantization == "none" else None

    @property
    def expert_weights_dtype(self) -> str:
        if self.architecture.expert_weight_dtype is not None:
            return self.architecture.expert_weight_dtype
        return self.weights_dtype
