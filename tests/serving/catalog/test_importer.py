"""The importer reads each family's config.json into the planner's Architecture: its layers'
attention kinds, experts, shared experts, dense layers and dtypes as the file and transformers'
defaults say; the catalog's twelve entries agree with their stored configs; and a config that
cannot be modelled is refused naming the file, the field and what would work."""

from __future__ import annotations

import json
from typing import Any

import pytest
from importer_support import FIXTURES, as_file, config_dict, deepseek_v3_2_config, fixture_file

from serving import catalog
from serving.catalog.importer import MAX_CONFIG_BYTES, import_architecture, parse_json
from serving.catalog.models import Architecture
from serving.errors import ServestackError


def imported(fixture: str) -> Architecture:
    return import_architecture(fixture_file(fixture))


def runs(arch: Architecture) -> dict[str, tuple[int, int | None]]:
    assert arch.attention_layers is not None
    return {run.kind: (run.layers, run.window) for run in arch.attention_layers}


class TestFamilies:
    """What each family's file says, read as the planner needs it."""

    def test_llama_3_1_takes_its_head_dim_from_the_class(self) -> None:
        arch = imported("meta-llama__Llama-3.1-8B-Instruct")
        # The file sets no head_dim; LlamaConfig derives 4096 / 32 = 128.
        assert arch.head_dim == 128 and arch.num_kv_heads == 8
        # embeddings 2 x 128256 x 4096 = 1,050,673,152; per layer: q, o 2 x 4096^2 = 33,554,432,
        # k, v 2 x 4096 x 1024 = 8,388,608, MLP 3 x 4096 x 14336 = 176,160,768, norms 8,192:
        # 218,112,000 x 32 = 6,979,584,000; + final norm 4,096 = 8,030,261,248.
        assert arch.total_params == arch.active_params == 8_030_261_248
        assert runs(arch) == {"full": (32, None)}

    def test_qwen2_5_counts_its_qkv_biases(self) -> None:
        arch = imported("Qwen__Qwen2.5-7B-Instruct")
        # embeddings 2 x 152064 x 3584 = 1,089,994,752; per layer: q 3584^2 + 3584 bias,
        # k, v 2 x (3584 x 512 + 512), o 3584^2 (no bias): 29,364,736; MLP 3 x 3584 x 18944 =
        # 203,685,888; norms 7,168: 233,057,792 x 28 = 6,525,618,176; + 3,584 = 7,615,616,512.
        assert arch.total_params == 7_615_616_512
        # use_sliding_window is false: Qwen2Config lists no sliding layer.
        assert runs(arch) == {"full": (28, None)} and arch.sliding_window_layers == 0

    def test_phi_4_fused_projections_count_as_separate_ones(self) -> None:
        arch = imported("microsoft__phi-4")
        # embeddings 2 x 100352 x 5120 = 1,027,604,480; per layer: qkv 5120 x (5120 + 2 x 1280)
        # = 39,321,600, o 26,214,400, gate_up 5120 x 35840 = 183,500,800, down 91,750,400,
        # norms 10,240: 340,797,440 x 40 = 13,631,897,600; + 5,120 = 14,659,507,200.
        assert arch.total_params == 14_659_507_200 and not arch.is_moe

    def test_mixtral_routes_two_of_eight_experts(self) -> None:
        arch = imported("mistralai__Mixtral-8x7B-Instruct-v0.1")
        assert (arch.num_experts, arch.experts_per_token, arch.intermediate_size) == (8, 2, 14336)
        # One expert is 3 x 4096 x 14336 = 176,160,768. Total: embeddings 262,144,000 + 32 x
        # (attention 41,943,040 + router 32,768 + 8 experts 1,409,286,144 + norms 8,192) + 4,096
        # = 46,702,792,704; a token skips 6 experts in each of 32 layers:
        # 46,702,792,704 - 32 x 6 x 176,160,768 = 12,879,925,248.
        assert arch.total_params == 46_702_792_704
        assert arch.active_params == 12_879_925_248
        assert arch.expert_params == 32 * 8 * 176_160_768

    def test_gpt_oss_alternates_128_token_windows_and_packs_experts_in_mxfp4(self) -> None:
        arch = imported("openai__gpt-oss-20b")
        assert runs(arch) == {"sliding": (12, 128), "full": (12, None)}
        assert arch.sliding_window_layers == 12 and arch.attention_sinks
        assert (arch.weight_dtype, arch.expert_weight_dtype) == ("bf16", "mxfp4")
        # per layer: attention with biases 26,550,080 + 64 sinks; router 2880 x 32 + 32; experts
        # 32 x (2880 x 5760 + 5760 + 2880 x 2880 + 2880) = 796,538,880; norms 5,760:
        # 823,186,976 x 24 = 19,756,487,424; + embeddings 1,158,266,880 + 2,880.
        assert arch.total_params == 20_914_757_184

    def test_gemma_3_nests_its_text_config_and_defaults_head_dim_to_256(self) -> None:
        arch = imported("google__gemma-3-4b-it")
        # text_config sets none of these: Gemma3TextConfig's defaults are 8 heads, 4 KV heads,
        # head_dim 256 (not 2560 / 8 = 320), vocab 262,208, tied embeddings.
        assert (arch.num_attention_heads, arch.num_kv_heads, arch.head_dim) == (8, 4, 256)
        assert arch.vocab_size == 262_208 and arch.tied_embeddings
        # sliding_window_pattern 6: layers 6, 12, ..., 30 of 34 are full.
        assert runs(arch) == {"sliding": (29, 1024), "full": (5, None)}
        # Text: embeddings 262208 x 2560 = 671,252,480; per layer q, o 2 x 2560 x 2048, k, v
        # 2 x 2560 x 1024, q/k norms 512, MLP 3 x 2560 x 10240, 4 norms 10,240: 94,382,592 x 34
        # = 3,209,008,128; + 2,560 = 3,880,263,168. SigLIP: patches 3 x 14^2 x 1152 + 1152 +
        # positions 64^2 x 1152 = 5,397,120; 27 layers x 15,239,504 = 411,466,608; post-norm
        # 2,304; projector 1152 x 2560 + 1152 = 2,950,272: 419,816,304.
        assert arch.total_params == 3_880_263_168 + 419_816_304

    def test_llama_4_chunks_three_layers_in_four_and_shares_an_expert(self) -> None:
        arch = imported("meta-llama__Llama-4-Scout-17B-16E-Instruct")
        # no_rope_layers marks every fourth layer NoPE: those attend fully, the rest in chunks.
        assert runs(arch) == {"chunked": (36, 8192), "full": (12, None)}
        assert (arch.num_experts, arch.experts_per_token, arch.num_shared_experts) == (16, 1, 1)
        assert arch.dense_layers == 0 and arch.intermediate_size == 8192

    def test_qwen3_next_is_three_linear_layers_to_one_full(self) -> None:
        arch = imported("Qwen__Qwen3-Next-80B-A3B-Instruct")
        assert arch.attention_layers is not None
        linear = next(run for run in arch.attention_layers if run.kind == "linear")
        # Gated DeltaNet state: 32 value heads x 128 x 128; its convolution spans q, k, v:
        # 2 x 16 x 128 + 32 x 128 = 8,192 channels x (kernel 4 - 1).
        assert (linear.layers, linear.state_shape, linear.conv_state_shape) == (
            36, [32, 128, 128], [8192, 3],
        )  # fmt: skip
        assert runs(arch)["full"] == (12, None) and arch.sliding_window_layers == 36
        assert (arch.num_experts, arch.experts_per_token, arch.num_shared_experts) == (512, 10, 1)

    def test_qwen3_next_without_an_interval_takes_the_class_default(self) -> None:
        data = config_dict("Qwen__Qwen3-Next-80B-A3B-Instruct")
        del data["full_attention_interval"]
        # Qwen3NextConfig's default interval is 4: the same 12 full layers.
        assert runs(import_architecture(as_file(data)))["full"] == (12, None)

    def test_deepseek_v3_is_latent_attention_with_three_dense_layers(self) -> None:
        arch = imported("deepseek-ai__DeepSeek-V3")
        assert arch.attention == "mla" and runs(arch) == {"mla": (61, None)}
        assert (arch.kv_lora_rank, arch.qk_rope_head_dim, arch.q_lora_rank) == (512, 64, 1536)
        assert (arch.dense_layers, arch.num_shared_experts, arch.num_experts) == (3, 1, 256)
        assert arch.weight_dtype == "fp8" and arch.head_dim == 128  # v_head_dim
        # Group-limited routing: a token's 8 experts from 4 of 8 groups (n_group, topk_group).
        assert (arch.expert_groups, arch.expert_groups_per_token) == (8, 4)
        assert arch.moe_layers == 58

    def test_routing_groups_that_cannot_hold_a_tokens_picks_are_refused(self) -> None:
        data = config_dict("deepseek-ai__DeepSeek-V3")
        error = _refused(data | {"topk_group": 9}, "", "expert_groups_per_token")
        assert "describes no model the planner can size" in error.render()

    def test_deepseek_v3_without_q_lora_rank_takes_the_class_default(self) -> None:
        data = config_dict("deepseek-ai__DeepSeek-V3")
        del data["q_lora_rank"]
        # DeepseekV3Config defaults q_lora_rank to 1536, not to an uncompressed query.
        assert import_architecture(as_file(data)).q_lora_rank == 1536

    def test_deepseek_v3_2_adds_its_sparse_indexer(self) -> None:
        arch = import_architecture(as_file(deepseek_v3_2_config()))
        assert arch.attention_layers is not None
        (run,) = arch.attention_layers
        assert (run.kind, run.indexer_topk, run.indexer_head_dim) == ("mla", 2048, 128)
        # Per layer: wq_b 1536 x 64 x 128 = 12,582,912, wk 7168 x 128 = 917,504,
        # weights_proj 7168 x 64 = 458,752, k_norm 2 x 128: 13,959,424, over 61 layers.
        v3 = imported("deepseek-ai__DeepSeek-V3")
        assert arch.total_params == v3.total_params + 61 * 13_959_424

    def test_kimi_k2_is_read_with_deepseek_v3s_class_as_vllm_does(self) -> None:
        arch = imported("moonshotai__Kimi-K2-Instruct")
        assert arch.attention == "mla" and arch.num_attention_heads == 64
        assert (arch.num_experts, arch.dense_layers, arch.vocab_size) == (384, 1, 163_840)
        # n_group 1: no group limit.
        assert (arch.expert_groups, arch.expert_groups_per_token) == (1, 1)

    def test_glm_4_5_has_dense_first_layers_and_a_shared_expert(self) -> None:
        arch = imported("zai-org__GLM-4.5")
        assert (arch.dense_layers, arch.num_shared_experts, arch.num_experts) == (3, 1, 160)
        assert arch.intermediate_size == 1536 and arch.experts_per_token == 8

    def test_qwen3_coder_writes_no_shared_expert_as_a_zero_width(self) -> None:
        """A real file's "shared_expert_intermediate_size": 0 (Qwen3 MoE has none) is a count of
        none, not a width out of range."""
        arch = imported("Qwen__Qwen3-Coder-480B-A35B-Instruct")
        assert (arch.num_experts, arch.experts_per_token, arch.num_shared_experts) == (160, 8, 0)
        # per layer: q, o 2 x 6144 x 12288 = 150,994,944, k, v 2 x 6144 x 1024 = 12,582,912, q/k
        # norms 256; router 6144 x 160 = 983,040; 160 experts of 3 x 6144 x 2560 = 47,185,920;
        # norms 12,288: 7,714,320,640 x 62 = 478,287,879,680; + embeddings 2 x 151936 x 6144 =
        # 1,866,989,568 + final norm 6,144 = 480,154,875,392.
        assert arch.total_params == 480_154_875_392
        assert arch.active_params == 480_154_875_392 - 62 * 152 * 47_185_920

    @pytest.mark.parametrize(
        "field", ["num_local_experts", "num_experts", "n_routed_experts", "num_experts_per_tok"]
    )
    def test_a_dense_model_may_write_its_expert_counts_as_zero(self, field: str) -> None:
        data = config_dict("meta-llama__Llama-3.1-8B-Instruct") | {field: 0}
        arch = import_architecture(as_file(data))
        assert not arch.is_moe and arch.total_params == 8_030_261_248

    def test_the_source_is_the_files_digest_unless_given(self) -> None:
        arch = imported("microsoft__phi-4")
        assert arch.source is not None and arch.source.startswith("config.json sha256:")
        named = import_architecture(fixture_file("microsoft__phi-4"), source="hf:x/y@abc")
        assert named.source == "hf:x/y@abc"

    def test_every_fixture_imports(self) -> None:
        assert len(FIXTURES) >= 12
        for fixture in FIXTURES:
            assert imported(fixture).total_params > 0


# The catalog key of each stored config.
CATALOG_FIXTURES = {
    "llama-3.1-8b": "meta-llama__Llama-3.1-8B-Instruct",
    "llama-3.3-70b": "meta-llama__Llama-3.3-70B-Instruct",
    "qwen3-0.6b": "Qwen__Qwen3-0.6B",
    "qwen3-8b": "Qwen__Qwen3-8B",
    "qwen3-14b": "Qwen__Qwen3-14B",
    "qwen3-32b": "Qwen__Qwen3-32B",
    "qwen3-30b-a3b": "Qwen__Qwen3-30B-A3B",
    "qwen3-235b-a22b": "Qwen__Qwen3-235B-A22B",
    "mixtral-8x7b": "mistralai__Mixtral-8x7B-Instruct-v0.1",
    "deepseek-v3": "deepseek-ai__DeepSeek-V3",
    "gpt-oss-20b": "openai__gpt-oss-20b",
    "gpt-oss-120b": "openai__gpt-oss-120b",
}
SHAPES = (
    "num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "head_dim",
    "intermediate_size", "vocab_size", "tied_embeddings", "max_position_embeddings",
    "weight_dtype", "expert_weight_dtype", "attention", "kv_lora_rank", "qk_rope_head_dim",
    "q_lora_rank", "num_experts", "experts_per_token", "sliding_window_layers", "attention_sinks",
    "dense_layers", "expert_groups", "expert_groups_per_token",
)  # fmt: skip


def test_the_catalog_covers_every_entry_with_a_stored_config() -> None:
    assert set(CATALOG_FIXTURES) == set(catalog.ARCHITECTURES)


@pytest.mark.parametrize("key", sorted(CATALOG_FIXTURES))
def test_each_catalog_entry_agrees_with_its_config_json(key: str) -> None:
    entry = catalog.ARCHITECTURES[key]
    arch = imported(CATALOG_FIXTURES[key])
    assert {f: getattr(arch, f) for f in SHAPES} == {f: getattr(entry, f) for f in SHAPES}
    if entry.attention_layers is not None:  # gpt-oss: its sliding and full runs
        assert arch.attention_layers == entry.attention_layers
    # The catalog's totals are the published, rounded figures.
    assert arch.total_params == pytest.approx(entry.total_params, rel=0.01)


def _refused(data: dict[str, Any] | bytes, field: str, words: str) -> ServestackError:
    file = "team/config.json"
    source = data if isinstance(data, bytes) else json.dumps(data).encode()
    with pytest.raises(ServestackError) as caught:
        import_architecture(parse_json(source, file))
    assert caught.value.source == file
    assert caught.value.field == field, caught.value.render()
    assert words in caught.value.render()
    assert caught.value.fix
    return caught.value


LLAMA = "meta-llama__Llama-3.1-8B-Instruct"


def _llama(**changes: Any) -> dict[str, Any]:
    data = config_dict(LLAMA)
    for name, value in changes.items():
        if value is None:
            del data[name]
        else:
            data[name] = value
    return data


class TestRefusals:
    """A config that cannot be modelled names the file, the field and what would work."""

    def test_a_file_over_the_size_limit(self) -> None:
        _refused(b" " * (MAX_CONFIG_BYTES + 1), "", "more than the")

    def test_nesting_past_the_limit(self) -> None:
        deep: dict[str, Any] = {}
        for _ in range(12):
            deep = {"x": deep}
        _refused(_llama(rope_scaling=deep), "", "nests more than 10 levels")

    def test_nan_and_duplicate_keys(self) -> None:
        _refused(b'{"hidden_size": NaN}', "", "NaN is not a number")
        _refused(b'{"a": 1, "a": 2}', "", "appears twice")

    @pytest.mark.parametrize(
        ("field", "value", "words"),
        [
            ("hidden_size", "4096", "not a whole number"),
            ("hidden_size", 4096.0, "not a whole number"),
            ("num_hidden_layers", True, "not a whole number"),
            ("num_hidden_layers", -1, "outside 1 to"),
            ("vocab_size", 10**12, "outside 1 to"),
            ("intermediate_size", 0, "outside 1 to"),
        ],
    )
    def test_shapes_that_are_not_sane_whole_numbers(
        self, field: str, value: Any, words: str
    ) -> None:
        _refused(_llama(**{field: value}), field, words)

    def test_heads_that_do_not_divide_the_width(self) -> None:
        # No head_dim in the file: 4096 / 24 is no whole head.
        _refused(_llama(num_attention_heads=24), "num_attention_heads", "do not divide")

    def test_kv_heads_that_do_not_divide_the_heads(self) -> None:
        _refused(_llama(num_key_value_heads=5), "num_key_value_heads", "do not divide")

    def test_missing_fields_with_no_default(self) -> None:
        _refused(_llama(architectures=None), "architectures", "is missing")
        _refused(_llama(model_type=None), "model_type", "is missing")

    def test_an_architecture_vllm_does_not_serve(self) -> None:
        _refused(_llama(architectures=["LlamaForBanana"]), "architectures", "not a model vLLM")

    def test_a_model_type_nobody_reads(self) -> None:
        _refused(_llama(model_type="banana"), "model_type", "neither transformers")

    def test_a_family_servestack_cannot_count_yet(self) -> None:
        data = _llama(model_type="falcon_h1", architectures=["FalconH1ForCausalLM"])
        _refused(data, "model_type", "cannot yet count")

    def test_a_quantization_it_cannot_size(self) -> None:
        # More schemes, sized and refused: test_importer_quantization.py
        data = _llama(quantization_config={"quant_method": "bitsandbytes", "load_in_4bit": True})
        _refused(data, "quantization_config.quant_method", "'bitsandbytes'")

    def test_a_nested_field_is_named_with_its_parent(self) -> None:
        data = config_dict("google__gemma-3-4b-it")
        data["text_config"]["num_hidden_layers"] = "34"
        _refused(data, "text_config.num_hidden_layers", "not a whole number")

    def test_what_transformers_itself_refuses(self) -> None:
        data = config_dict("openai__gpt-oss-20b")
        data["layer_types"] = data["layer_types"][:-1]  # 23 types for 24 layers
        _refused(data, "", "GptOssConfig refuses it")
