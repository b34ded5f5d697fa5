"""Tiny models for the real engine on a CPU, made here, deterministically, with nothing downloaded.

A profile names a large model (Llama 3.1 8B, Qwen3 30B-A3B); the CPU serves a tiny model of the
same family in its place: the same architecture class in its Hugging Face config, random weights
from `transformers` under a fixed seed, a byte-level BPE tokenizer trained with `tokenizers` on a
fixed corpus, and a chat template. vLLM loads it as it would the real checkpoint.

`tiny_model(family)` returns the model's directory under the repo's ignored build folder, making
it once; the directory's name carries a digest of every input, so a change to the recipe makes a
new model instead of reusing a stale one.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from serving.paths import BUILD_DIR as BUILD

Family = Literal["llama", "qwen3_moe"]
FAMILIES: tuple[Family, ...] = ("llama", "qwen3_moe")

BUILD_DIR = BUILD / "tiny-models"
SEED = 20260
VOCAB_SIZE = 2048
# Every shipped profile's context fits (Llama 3.1's own limit); the KV cache is sized by vLLM
# from the engine's max_model_len, never from this.
MAX_POSITIONS = 131072

SPECIAL_TOKENS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                  "<|end_header_id|>", "<|eot_id|>"]  # fmt: skip
BOS, EOS = "<|begin_of_text|>", "<|eot_id|>"
# Llama 3's template, shortened: a header per message, <|eot_id|> after each.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n"
    "{{ message['content'] | trim }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)

# Head size 64: vLLM's CPU attention kernels take 32, 64, 80, 96, 112, 128, 256 only. Four query
# heads over two KV heads, so tensor parallelism 2 splits both evenly.
_SHAPE: dict[str, Any] = {
    "vocab_size": VOCAB_SIZE,
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "max_position_embeddings": MAX_POSITIONS,
    "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "float32",
}
# Qwen3-MoE's shape in miniature: 8 experts, 2 per token, every layer sparse.
_MOE: dict[str, Any] = {
    "num_experts": 8,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 256,
    "decoder_sparse_step": 1,
    "norm_topk_prob": True,
    "mlp_only_layers": [],
}


def recipe(family: Family) -> dict[str, Any]:
    """Everything that decides the made model; its digest names the model's directory."""
    return {
        "family": family,
        "seed": SEED,
        "shape": _SHAPE | (_MOE if family == "qwen3_moe" else {}),
        "special_tokens": SPECIAL_TOKENS,
        "chat_template": CHAT_TEMPLATE,
        "corpus": _corpus_lines(1)[0],
    }


def model_dir(family: Family, root: Path = BUILD_DIR) -> Path:
    digest = hashlib.sha256(json.dumps(recipe(family), sort_keys=True).encode()).hexdigest()
    return root / f"{family}-{digest[:12]}"


def made_once(target: Path, marker: str, make: Callable[[Path], None]) -> Path:
    """`target`, made by `make` on first use (in a temporary directory beside it, then renamed,
    so a run that dies midway leaves nothing half-made behind); made already once `marker`, a
    file `make` writes, is in it."""
    if (target / marker).exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        make(scratch)
        try:
            os.rename(scratch, target)
        except OSError:  # another process made it first: theirs is the same
            shutil.rmtree(scratch, ignore_errors=True)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return target


def tiny_model(family: Family, root: Path = BUILD_DIR) -> Path:
    """The family's tiny model directory, made on first use (made_once)."""
    return made_once(model_dir(family, root), "config.json", lambda into: _make(family, into))


def _corpus_lines(count: int) -> list[str]:
    """A fixed English-like corpus (plus the numbered words the benchmark sends), so the BPE
    merges are the same on every machine."""
    words = [
        "the",
        "a",
        "an",
        "of",
        "to",
        "and",
        "in",
        "is",
        "it",
        "that",
        "for",
        "on",
        "with",
        "as",
        "was",
        "by",
        "at",
        "this",
        "from",
        "be",
        "are",
        "or",
        "which",
        "you",
        "your",
        "we",
        "our",
        "they",
        "say",
        "count",
        "story",
        "once",
        "upon",
        "time",
        "model",
        "serve",
        "engine",
        "request",
        "token",
        "prompt",
        "cache",
        "replica",
        "router",
        "fast",
        "path",
        "stream",
        "chat",
        "system",
        "user",
        "assistant",
        "answer",
        "question",
    ]
    rng = random.Random(SEED)
    lines = []
    for _ in range(count):
        parts = [rng.choice(words) for _ in range(12)]
        parts += [f"t{rng.randrange(1_000_000)}" for _ in range(2)]
        rng.shuffle(parts)
        lines.append(" ".join(parts) + rng.choice([".", "?", "!", ","]))
    return lines


def _train_tokenizer(directory: Path) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_corpus_lines(4000), trainer=trainer)
    fast = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tokenizer,
        bos_token=BOS,
        eos_token=EOS,
        pad_token="<|end_of_text|>",
        chat_template=CHAT_TEMPLATE,
        model_max_length=MAX_POSITIONS,
    )
    fast.save_pretrained(directory)
    return fast


def _make(family: Family, directory: Path) -> None:
    import torch
    import transformers

    tokenizer = _train_tokenizer(directory)
    shape = recipe(family)["shape"] | {
        "vocab_size": len(tokenizer),
        "bos_token_id": tokenizer.convert_tokens_to_ids(BOS),
        "eos_token_id": tokenizer.convert_tokens_to_ids(EOS),
        "pad_token_id": tokenizer.pad_token_id,
    }
    if family == "llama":
        config: Any = transformers.LlamaConfig(**shape)  # type: ignore[no-untyped-call]
        model_class: Any = transformers.LlamaForCausalLM
    else:
        config = transformers.Qwen3MoeConfig(**shape)  # type: ignore[no-untyped-call]
        model_class = transformers.Qwen3MoeForCausalLM
    torch.manual_seed(SEED)
    model = model_class(config).to(torch.float32)
    model.save_pretrained(directory, safe_serialization=True)
    model.generation_config.save_pretrained(directory)


def main() -> None:
    """`python -m serving.local.engine.tiny_models [FAMILY ...]`: make (or find) the tiny models."""
    import sys

    for name in sys.argv[1:] or FAMILIES:
        family = next((f for f in FAMILIES if f == name), None)
        if family is None:
            raise SystemExit(f"error: no tiny model family '{name}'; known: {FAMILIES}")
        print(tiny_model(family))


if __name__ == "__main__":
    main()
