"""The `lora:` section of a profile: LoRA adapters served on the profile's base model, and how
many of them a replica holds (vLLM's `max_loras` on the GPU, `max_cpu_loras` in CPU memory).

What the code relies on, read in Ray 2.56.1 and vLLM 0.22.0 (site-packages paths):
- A client asks for an adapter by the model id `<base>:<adapter>`: Ray's ingress splits it at the
  first ':' (`ray/llm/_internal/common/utils/lora_utils.py:44-51`, get_base_model_id /
  get_lora_id) and routes it as a multiplexed model (`.../serve/core/ingress/ingress.py:285-325`).
  So an adapter name may not hold ':' itself, and every id is `adapter_model_id(base, name)`.
- Ray loads an adapter from `<lora_config.dynamic_lora_loading_path>/<adapter>`
  (`.../serve/utils/lora_serve_utils.py:67-83`), a cloud path only (s3, gs, abfss, azure:
  `.../serve/core/configs/llm_config.py:106-116`), and downloads it to a local cache
  (`lora_serve_utils.py:137-218`); it has no Hugging Face loader for adapters.
- `/v1/models` on the ingress lists the base and one id per subfolder of that path
  (`ingress.py:432-451`, `lora_utils.py:184-209`), and omits a subfolder without
  `adapter_config.json` (`ingress.py:406-430`).
- vLLM: `max_lora_rank` is one of 1, 8, 16, 32, 64, 128, 256, 320, 512, `max_loras` >= 1, and
  `max_cpu_loras` >= `max_loras` (`vllm/config/lora.py:26-45,108-116`); every LoRA layer is
  preallocated for `max_loras` adapters at `max_lora_rank`
  (`vllm/lora/layers/base_linear.py:99-150`).
"""

from __future__ import annotations

import re
from typing import Literal, get_args

from pydantic import Field, field_validator, model_validator

from serving.errors import FixableValueError
from serving.frozen import StrictFrozen
from serving.spec.sources import GCS_SCHEME
from serving.spec.sources import HF_REPO as _HF_REPO

# vLLM 0.22's MaxLoRARanks (vllm/config/lora.py:26): the ranks its kernels are built for.
MaxLoraRank = Literal[1, 8, 16, 32, 64, 128, 256, 320, 512]
MAX_LORA_RANKS: tuple[int, ...] = get_args(MaxLoraRank)
# The character Ray splits a model id at into base and adapter (lora_utils.get_base_model_id).
ADAPTER_SEPARATOR = ":"
# An adapter's name is also the folder Ray reads it from and part of an OpenAI model id:
# lower-case letters, digits, '.', '_' and '-', no ':' (Ray would split there) and no '/'.
_ADAPTER_NAME = re.compile(r"^[a-z0-9]([a-z0-9._-]{0,62}[a-z0-9])?$")
_GCS_FOLDER = re.compile(rf"^{re.escape(GCS_SCHEME)}[a-z0-9][a-z0-9._-]{{1,221}}[a-z0-9]/\S+$")


def adapter_model_id(base_model_id: str, adapter: str) -> str:
    """The OpenAI model id a client names an adapter by: `<base>:<adapter>` (Ray's multiplexed
    model id, split at the first ':' by its ingress)."""
    return f"{base_model_id}{ADAPTER_SEPARATOR}{adapter}"


class Adapter(StrictFrozen):
    """One LoRA adapter of the base model."""

    name: str = Field(
        description="Served as '<model name>:<name>'; lower-case letters, digits, '.', '_', '-'."
    )
    source: str = Field(
        description="gs://<bucket>/<folder>/<name>, in the bucket of the model's weights: Ray "
        "2.56.1 loads adapters from one folder of subfolders. (A Hugging Face repo 'org/name' is "
        "refused: Ray 2.56.1 cannot load adapters from the Hub.)"
    )
    rank: int = Field(ge=1, le=512, description="The adapter's LoRA rank (r in its config).")

    @field_validator("name")
    @classmethod
    def _clean_name(cls, value: str) -> str:
        if not _ADAPTER_NAME.fullmatch(value):
            raise FixableValueError(
                f"'{value}' is not an adapter name",
                "use lower-case letters, digits, '.', '_' and '-', starting and ending with a "
                "letter or digit, at most 64 characters (no ':', which Ray splits model ids at, "
                "and no '/'), e.g. 'sql-expert'",
            )
        return value

    @field_validator("source")
    @classmethod
    def _source(cls, value: str) -> str:
        if value.startswith(GCS_SCHEME):
            if not _GCS_FOLDER.fullmatch(value.rstrip("/")):
                raise FixableValueError(
                    f"'{value}' is not a valid gs:// path",
                    "use gs://<bucket>/<folder>/<adapter name>",
                )
            return value.rstrip("/")
        if not _HF_REPO.fullmatch(value):
            raise FixableValueError(
                f"'{value}' is neither a Hugging Face repo nor a gs:// path",
                "use 'org/adapter' or gs://<bucket>/<folder>/<adapter name>",
            )
        return value

    @property
    def on_gcs(self) -> bool:
        return self.source.startswith(GCS_SCHEME)

    @property
    def bucket(self) -> str | None:
        """The Cloud Storage bucket the adapter is read from; None for a Hugging Face repo."""
        if not self.on_gcs:
            return None
        return self.source.removeprefix(GCS_SCHEME).partition("/")[0]

    @property
    def folder(self) -> str | None:
        """The gs:// folder holding the adapter's own folder (what Ray lists), or None."""
        if not self.on_gcs:
            return None
        return self.source.rpartition("/")[0]


class Lora(StrictFrozen):
    """LoRA adapters on the base model, and vLLM's room for them on each replica."""

    adapters: list[Adapter] = Field(
        min_length=1, description="The adapters served, each as '<model name>:<adapter name>'."
    )
    max_loras: int = Field(
        default=1,
        ge=1,
        le=256,
        description="Adapters one engine step may mix, each with a slot of every LoRA layer "
        "preallocated on the GPU (vLLM's max_loras).",
    )
    max_cpu_loras: int | None = Field(
        default=None,
        ge=1,
        le=4096,
        description="Adapters a replica keeps loaded in CPU memory (vLLM's max_cpu_loras, Ray's "
        "max_num_adapters_per_replica); unset, as many as max_loras.",
    )
    max_lora_rank: MaxLoraRank = Field(
        default=16,
        description="The largest rank served; vLLM preallocates every slot at it.",
    )

    @field_validator("adapters")
    @classmethod
    def _unique(cls, value: list[Adapter]) -> list[Adapter]:
        seen: set[str] = set()
        for adapter in value:
            if adapter.name in seen:
                raise FixableValueError(
                    f"adapter '{adapter.name}' is named twice; each name is one model id",
                    "give each adapter its own name",
                )
            seen.add(adapter.name)
        return value

    @model_validator(mode="after")
    def _within_limits(self) -> Lora:
        for index, adapter in enumerate(self.adapters):
            if adapter.rank > self.max_lora_rank:
                raise FixableValueError(
                    f"adapter '{adapter.name}' has rank {adapter.rank}, above max_lora_rank "
                    f"{self.max_lora_rank}: vLLM refuses to load it",
                    f"raise max_lora_rank to {smallest_rank_at_least(adapter.rank)}",
                    field=f"adapters.{index}.rank",
                )
        self._where_ray_loads_them()
        if self.max_cpu_loras is not None and self.max_cpu_loras < self.max_loras:
            raise FixableValueError(
                f"max_cpu_loras ({self.max_cpu_loras}) is below max_loras ({self.max_loras}); "
                "vLLM needs every adapter on the GPU held in CPU memory too",
                f"raise max_cpu_loras to at least {self.max_loras}, or unset it",
                field="max_cpu_loras",
            )
        return self

    def _where_ray_loads_them(self) -> None:
        """Ray 2.56.1 loads every adapter from `<dynamic_lora_loading_path>/<adapter>`, one
        cloud folder for them all, and lists that folder's subfolders in /v1/models."""
        first = self.adapters[0]
        for index, adapter in enumerate(self.adapters):
            field = f"adapters.{index}.source"
            if not adapter.on_gcs:
                raise FixableValueError(
                    f"adapter '{adapter.name}' comes from the Hugging Face repo {adapter.source}; "
                    "Ray Serve LLM 2.56.1 loads adapters only from one cloud folder "
                    "(lora_config.dynamic_lora_loading_path), not from the Hub",
                    f"copy it to gs://<bucket>/<folder>/{adapter.name} and name that as source",
                    field=field,
                )
            if adapter.source.rpartition("/")[2] != adapter.name:
                raise FixableValueError(
                    f"adapter '{adapter.name}' is at {adapter.source}, but Ray 2.56.1 loads "
                    f"'{adapter.name}' from the folder named after it",
                    f"put it at {adapter.folder}/{adapter.name}, or name it "
                    f"'{adapter.source.rpartition('/')[2]}'",
                    field=field,
                )
            if adapter.folder != first.folder:
                raise FixableValueError(
                    f"adapter '{adapter.name}' is in {adapter.folder}, '{first.name}' in "
                    f"{first.folder}: Ray 2.56.1 loads all of a model's adapters from one folder, "
                    "and lists every subfolder of it in /v1/models",
                    f"put every adapter in its own subfolder of one folder, e.g. "
                    f"gs://{first.bucket}/adapters/{adapter.name}",
                    field=field,
                )

    @property
    def loading_path(self) -> str:
        """Ray's `dynamic_lora_loading_path`: the one folder every adapter is a subfolder of."""
        folder = self.adapters[0].folder
        assert folder is not None
        return folder

    @property
    def cpu_loras(self) -> int:
        """Adapters held in CPU memory (vLLM defaults max_cpu_loras to max_loras)."""
        return self.max_cpu_loras if self.max_cpu_loras is not None else self.max_loras

    @property
    def buckets(self) -> list[str]:
        """The Cloud Storage buckets adapters are read from, in order, once each."""
        return list(dict.fromkeys(a.bucket for a in self.adapters if a.bucket is not None))


def smallest_rank_at_least(rank: int) -> int:
    """The smallest rank vLLM accepts as max_lora_rank that holds `rank`."""
    return next(r for r in MAX_LORA_RANKS if r >= rank)
