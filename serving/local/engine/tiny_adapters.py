"""Tiny LoRA adapters for the tiny models, made here with `peft`, deterministically, with nothing
downloaded: a profile's adapters are fine-tunes of a large model; the CPU serves random adapters
of the same names and ranks on the tiny model standing in for it
(`serving.local.engine.tiny_models`).

Each adapter's weights are drawn under a seed of its own (from its name), on the attention
projections vLLM applies LoRA to, and scaled (`lora_alpha`) so that its change to the weights is
larger than the tiny model's own random weights: greedy decoding then answers differently under
each adapter and under the base model, which is what a test of adapter serving can tell apart.

`tiny_adapter(family, name, rank)` returns the adapter's directory (adapter_config.json and
adapter_model.safetensors, as `peft` saves them) under the build folder, making it once; the
directory's name carries a digest of every input, the base model's included.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from serving.local.engine.tiny_models import BUILD_DIR as MODELS_DIR
from serving.local.engine.tiny_models import SEED, Family, made_once, tiny_model

BUILD_DIR = MODELS_DIR.parent / "tiny-adapters"
# The projections both tiny families have and vLLM's LoRA layers cover (its packed qkv_proj
# takes q, k and v adapters alike).
TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj")
# lora_alpha / rank. peft leaves A and B as torch's nn.Linear draws them (uniform, 1/sqrt(fan-in)
# bounds: std 0.036 for A on the 256-wide model, 0.2 for B at rank 8), so B·A·alpha/rank has a
# std of about sqrt(8) x 0.2 x 0.036 x 4 = 0.08 per weight: four times the tiny model's own
# (normal, std 0.02).
ALPHA_PER_RANK = 4


def recipe(family: Family, name: str, rank: int, base: Path) -> dict[str, Any]:
    """Everything that decides the made adapter; its digest names the adapter's directory."""
    return {
        "family": family,
        "base": base.name,  # the tiny model's own digest
        "name": name,
        "rank": rank,
        "seed": seed_of(name),
        "target_modules": TARGET_MODULES,
        "alpha_per_rank": ALPHA_PER_RANK,
    }


def seed_of(name: str) -> int:
    """The adapter's own seed: stable across processes and machines."""
    return SEED + int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big")


def adapter_dir(family: Family, name: str, rank: int, root: Path = BUILD_DIR) -> Path:
    base = tiny_model(family)
    digest = hashlib.sha256(
        json.dumps(recipe(family, name, rank, base), sort_keys=True).encode()
    ).hexdigest()
    return root / f"{family}-{name}-r{rank}-{digest[:12]}"


def tiny_adapter(family: Family, name: str, rank: int, root: Path = BUILD_DIR) -> Path:
    """The adapter's directory, made on first use (made_once)."""
    return made_once(
        adapter_dir(family, name, rank, root),
        "adapter_config.json",
        lambda into: _make(family, name, rank, into),
    )


def _make(family: Family, name: str, rank: int, directory: Path) -> None:
    import peft
    import torch
    import transformers

    base = tiny_model(family)
    model = transformers.AutoModelForCausalLM.from_pretrained(base, torch_dtype=torch.float32)
    config = peft.LoraConfig(
        r=rank,
        lora_alpha=ALPHA_PER_RANK * rank,
        target_modules=list(TARGET_MODULES),
        lora_dropout=0.0,
        bias="none",
        task_type="CAUSAL_LM",
        # Leave A and B as torch initialises them (random), not B = 0: an adapter that changes
        # nothing could not be told from the base model.
        init_lora_weights=False,
    )
    torch.manual_seed(seed_of(name))
    adapted = peft.get_peft_model(model, config)
    adapted.save_pretrained(str(directory), safe_serialization=True)
