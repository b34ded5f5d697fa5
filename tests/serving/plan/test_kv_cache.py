"""The KV cache per attention kind as vLLM 0.22 allocates it, worked by hand for each family's
stored config.json: what a token adds in the layers that grow, what a sequence holds in the
layers that are capped or fixed, and the groups vLLM's hybrid manager makes of the layers.

Every figure is at max_model_len 32,768, max_num_batched_tokens 8,192, a BF16 cache unless
said, one H100 (FlashAttention's 16-token blocks), prefix caching on."""

from __future__ import annotations

from typing import Any

import pytest
from importer_support import FIXTURES, as_file, config_dict, deepseek_v3_2_config, fixture_file
from planner_support import spec

from serving.catalog.importer import import_architecture
from serving.plan import kv_cache
from serving.plan.memory import memory
from serving.spec.parts import Parallelism
from serving.spec.profile import ModelSpec

LENGTH = 32_768


def imported(fixture: str, **fields: Any) -> ModelSpec:
    arch = import_architecture(fixture_file(fixture))
    return _spec(arch.model_dump(), **fields)


def _spec(arch: dict[str, Any], **fields: Any) -> ModelSpec:
    length = min(LENGTH, arch["max_position_embeddings"])  # Phi-4: 16,384
    return spec(architecture=arch, max_model_len=length, max_num_batched_tokens=8192, **fields)


# (fixture, per token, per sequence), worked below.
WORKED = [
    # 32 layers x 2 (K, V) x 8 KV heads x 128 x 2 bytes.
    ("meta-llama__Llama-3.1-8B-Instruct", 131_072, 0),
    # 80 layers x 2 x 8 x 128 x 2.
    ("meta-llama__Llama-3.3-70B-Instruct", 327_680, 0),
    # 28 layers x 2 x 4 KV heads x 128 x 2 (use_sliding_window false: no window).
    ("Qwen__Qwen2.5-7B-Instruct", 57_344, 0),
    # Qwen3 sets head_dim 128 whatever the width: 28, 36, 40, 64 layers x 2 x 8 x 128 x 2.
    ("Qwen__Qwen3-0.6B", 114_688, 0),
    ("Qwen__Qwen3-8B", 147_456, 0),
    ("Qwen__Qwen3-14B", 163_840, 0),
    ("Qwen__Qwen3-32B", 262_144, 0),
    # Qwen3 MoE: 48 and 94 layers x 2 x 4 KV heads x 128 x 2.
    ("Qwen__Qwen3-30B-A3B", 98_304, 0),
    ("Qwen__Qwen3-235B-A22B", 192_512, 0),
    # Qwen3-Coder-480B-A35B: 62 layers x 2 x 8 KV heads x 128 x 2.
    ("Qwen__Qwen3-Coder-480B-A35B-Instruct", 253_952, 0),
    # 32 layers x 2 x 8 x 128 x 2; its sliding_window is null.
    ("mistralai__Mixtral-8x7B-Instruct-v0.1", 131_072, 0),
    # 40 layers x 2 x 8 x 128 x 2.
    ("mistralai__Mistral-Small-24B-Instruct-2501", 163_840, 0),
    # 40 layers x 2 x 10 KV heads x 128 x 2.
    ("microsoft__phi-4", 204_800, 0),
    # 92 layers x 2 x 8 x 128 x 2 (the MTP layer carries no cache in the served model).
    ("zai-org__GLM-4.5", 376_832, 0),
    # MLA: 61 layers x (512 latent + 64 RoPE key) x 2 bytes, whole on every rank.
    ("deepseek-ai__DeepSeek-V3", 70_272, 0),
    ("moonshotai__Kimi-K2-Instruct", 70_272, 0),
    # Gemma 3 4B: 4 KV heads x 256 x 2 x 2 = 4,096 bytes a token a layer; 5 full layers grow:
    # 20,480. 29 sliding layers of 1,024: vLLM groups by the fewest (5), so 6 sliding groups
    # (30 slots, one padding), each of 5 x 16 x 4,096 = 327,680-byte blocks, holding
    # cdiv(min(1,023 + 8,192, 32,768), 16) + 1 = 577 blocks: 6 x 577 x 327,680.
    ("google__gemma-3-4b-it", 20_480, 1_134_428_160),
    # gpt-oss-20b: 8 KV heads x 64 x 2 x 2 = 2,048 a token a layer; 12 full layers: 24,576.
    # 12 sliding layers of 128: one group of 12, blocks of 12 x 16 x 2,048 = 393,216 bytes,
    # cdiv(min(127 + 8,192, 32,768), 16) + 1 = 521 of them.
    ("openai__gpt-oss-20b", 24_576, 521 * 393_216),
    # gpt-oss-120b: 18 full layers of 2,048 bytes a token: 36,864; 18 sliding layers in one
    # group of 18 x 16 x 2,048 = 589,824-byte blocks, 521 of them.
    ("openai__gpt-oss-120b", 36_864, 521 * 589_824),
    # Llama 4 Scout: 12 full (NoPE) layers of 8 KV heads x 128 x 2 x 2 = 4,096 bytes: 49,152.
    # 36 chunked layers of 8,192 tokens in groups of 12: 3 groups of 12 x 16 x 4,096 =
    # 786,432-byte blocks, each holding cdiv(min(8,192 + 8,192, 32,768), 16) = 1,024 blocks.
    ("meta-llama__Llama-4-Scout-17B-16E-Instruct", 49_152, 3 * 1024 * 786_432),
    # Qwen3-Next: 12 full layers of 2 KV heads x 256 x 2 x 2 = 2,048 bytes a token: 24,576.
    # A Gated DeltaNet state is (8,192 x 3 conv + 32 x 128 x 128) x 2 bytes = 1,097,728; vLLM
    # grows the attention block to 16 x cdiv(1,097,728, 16 x 2,048) = 544 tokens, a page of
    # 1,114,112 bytes, and pads the state to it. 36 linear layers in groups of 12: 3 groups,
    # each holding 2 pages (prefix caching's "align" mode) of 12 x 1,114,112 bytes.
    ("Qwen__Qwen3-Next-80B-A3B-Instruct", 24_576, 3 * 2 * 12 * 1_114_112),
]


def test_every_stored_config_is_worked_by_hand() -> None:
    assert {fixture for fixture, _, _ in WORKED} == set(FIXTURES)


@pytest.mark.parametrize(("fixture", "per_token", "per_sequence"), WORKED)
def test_each_family_holds_what_vllm_allocates(
    fixture: str, per_token: int, per_sequence: int
) -> None:
    mem = memory(imported(fixture), Parallelism(tensor=8))
    assert (mem.kv_cache_bytes_per_token, mem.kv_cache_bytes_per_sequence) == (
        per_token,
        per_sequence,
    )


def test_deepseek_v3_2_caches_the_indexers_keys_beside_the_latent() -> None:
    arch = import_architecture(as_file(deepseek_v3_2_config())).model_dump()
    # BF16: 61 x (576 x 2 + 128 + 4 scale bytes) = 61 x 1,284 = 78,324.
    assert memory(_spec(arch), Parallelism(tensor=8)).kv_cache_bytes_per_token == 78_324
    # FP8: the sparse backend (FlashMLA) stores DeepSeek's 656-byte fp8_ds_mla token:
    # 61 x (656 + 132) = 48,068.
    fp8 = memory(_spec(arch, kv_cache_dtype="fp8"), Parallelism(tensor=8))
    assert fp8.kv_cache_bytes_per_token == 48_068


def test_a_model_whose_every_layer_is_windowed_holds_its_window() -> None:
    # MistralConfig's default without the file's null: a 4,096-token window in all 40 layers
    # (Mistral 7B v0.1 ships it so); vLLM caches them as one sliding group of 40 x 16 x 4,096
    # = 2,621,440-byte blocks, cdiv(min(4,095 + 8,192, 32,768), 16) + 1 = 769 of them.
    data = config_dict("mistralai__Mistral-Small-24B-Instruct-2501")
    del data["sliding_window"]
    arch = import_architecture(as_file(data)).model_dump()
    mem = memory(_spec(arch), Parallelism(tensor=2))
    assert (mem.kv_cache_bytes_per_token, mem.kv_cache_bytes_per_sequence) == (0, 769 * 2_621_440)
    assert mem.fits


def test_an_fp8_cache_halves_attention_and_moves_mla_to_flashmla_blocks() -> None:
    llama = memory(
        imported("meta-llama__Llama-3.1-8B-Instruct", kv_cache_dtype="fp8"), Parallelism()
    )
    assert llama.kv_cache_bytes_per_token == 65_536
    deepseek = imported("deepseek-ai__DeepSeek-V3", kv_cache_dtype="fp8")
    cache = kv_cache.layout(deepseek, Parallelism(tensor=8))
    # FlashMLA (the FP8 MLA kernel on Hopper) takes 64-token blocks: 61 x 576 x 64 bytes each.
    assert cache.block_bytes == 61 * 576 * 64
    assert cache.blocks_per_sequence(LENGTH) == 512


class TestPerGpu:
    """What one GPU of a layout holds."""

    def test_tensor_parallelism_splits_kv_heads_until_one_each(self) -> None:
        llama = imported("meta-llama__Llama-3.3-70B-Instruct")
        assert memory(llama, Parallelism(tensor=4)).kv_cache_bytes_per_token_per_gpu == 81_920
        # 8 KV heads over 16 ranks: each keeps one head, replicated.
        per_gpu = kv_cache.layout(llama, Parallelism(tensor=16)).bytes_per_token
        assert per_gpu == 80 * 2 * 1 * 128 * 2

    def test_mla_latent_is_whole_on_every_rank(self) -> None:
        deepseek = imported("deepseek-ai__DeepSeek-V3")
        assert kv_cache.layout(deepseek, Parallelism(tensor=8)).bytes_per_token == 70_272

    def test_pipeline_stages_split_the_layers(self) -> None:
        llama = imported("meta-llama__Llama-3.3-70B-Instruct")
        cache = kv_cache.layout(llama, Parallelism(tensor=4, pipeline=2))
        assert cache.bytes_per_token == 40 * 2 * 2 * 128 * 2

    def test_linear_state_splits_over_tensor_parallel_ranks(self) -> None:
        qwen = imported("Qwen__Qwen3-Next-80B-A3B-Instruct")
        cache = kv_cache.layout(qwen, Parallelism(tensor=4))
        # TP4: a state of (2,048 x 3 + 8 x 128 x 128) x 2 = 274,432 bytes; one KV head of 256
        # is 1,024 bytes a token; the block grows to 16 x cdiv(274,432, 16,384) = 272 tokens.
        linear = next(g for g in cache.groups if g.spec.kind == "linear")
        assert linear.spec.page_bytes == 272 * 1024
        assert cache.blocks_per_sequence(LENGTH) == 3 * 2 + 121  # cdiv(32,768, 272) = 121


class TestConcurrency:
    """Sequences held: vLLM's maximum concurrency, num_blocks / blocks per sequence."""

    def test_gemma_3_sequences_take_full_and_window_blocks(self) -> None:
        gemma = imported("google__gemma-3-4b-it")
        cache = kv_cache.layout(gemma, Parallelism())
        assert [(g.spec.kind, g.slots, g.layers) for g in cache.groups] == [
            ("sliding", 5, 5), ("sliding", 5, 5), ("sliding", 5, 5), ("sliding", 5, 5),
            ("sliding", 5, 5), ("sliding", 5, 4), ("full", 5, 5),
        ]  # fmt: skip
        # 6 sliding groups x 577 blocks + 2,048 blocks of the full group.
        assert cache.blocks_per_sequence(LENGTH) == 6 * 577 + 2048
        mem = memory(gemma, Parallelism())
        assert mem.kv_cache_blocks == mem.kv_cache_bytes // 327_680
        assert mem.max_concurrent_sequences == mem.kv_cache_blocks // (6 * 577 + 2048)

    def test_a_sequence_longer_than_the_cache_does_not_fit(self) -> None:
        llama = imported("meta-llama__Llama-3.3-70B-Instruct")
        assert not memory(llama, Parallelism(tensor=2)).fits
        assert memory(llama, Parallelism(tensor=4)).fits

    def test_data_parallel_ranks_add_their_caches(self) -> None:
        qwen = imported("Qwen__Qwen3-30B-A3B")
        one = memory(qwen, Parallelism())
        two = memory(qwen, Parallelism(data=2, expert=True))
        assert two.max_concurrent_sequences == 2 * int(
            two.kv_cache_blocks / kv_cache.layout(qwen, Parallelism()).blocks_per_sequence(LENGTH)
        )
        assert one.kv_capacity_tokens > 0
