"""The model-architecture catalog: the shapes that decide memory, KV cache and compute.

Every figure comes from the model's published `config.json` and model card on Hugging Face
(the URL is on each entry); tests/serving/catalog/test_importer.py checks each entry against the
stored copy of its config. A profile may instead carry the same fields inline for a model the
catalog lacks, or `servestack init --config` may read them from the model's own file.
"""

from __future__ import annotations

from serving.catalog.architecture import (
    BYTES_PER_WEIGHT,
    BYTES_PER_WEIGHT_AS_LOADED,
    MAX_DIMENSION,
    MAX_PARAMS,
    Architecture,
)

__all__ = [
    "ARCHITECTURES",
    "BYTES_PER_WEIGHT",
    "BYTES_PER_WEIGHT_AS_LOADED",
    "MAX_DIMENSION",
    "MAX_PARAMS",
    "Architecture",
]


def _arch(**fields: object) -> Architecture:
    return Architecture.model_validate(fields)


ARCHITECTURES: dict[str, Architecture] = {
    arch.key: arch
    for arch in (
        # https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct (config.json; 8.03B params)
        _arch(
            key="llama-3.1-8b",
            hf_repo="meta-llama/Llama-3.1-8B-Instruct",
            total_params=8.03e9,
            active_params=8.03e9,
            num_layers=32,
            hidden_size=4096,
            num_attention_heads=32,
            num_kv_heads=8,
            head_dim=128,
            intermediate_size=14336,
            vocab_size=128256,
            max_position_embeddings=131072,
        ),
        # https://huggingface.co/meta-llama/Llama-3.3-70B-Instruct (config.json; 70.6B params)
        _arch(
            key="llama-3.3-70b",
            hf_repo="meta-llama/Llama-3.3-70B-Instruct",
            total_params=70.55e9,
            active_params=70.55e9,
            num_layers=80,
            hidden_size=8192,
            num_attention_heads=64,
            num_kv_heads=8,
            head_dim=128,
            intermediate_size=28672,
            vocab_size=128256,
            max_position_embeddings=131072,
        ),
        # https://huggingface.co/Qwen/Qwen3-0.6B (0.6B params, 0.44B non-embedding, tied)
        _arch(
            key="qwen3-0.6b",
            hf_repo="Qwen/Qwen3-0.6B",
            total_params=0.596e9,
            active_params=0.596e9,
            num_layers=28,
            hidden_size=1024,
            num_attention_heads=16,
            num_kv_heads=8,
            head_dim=128,
            intermediate_size=3072,
            vocab_size=151936,
            tied_embeddings=True,
            max_position_embeddings=40960,
        ),
        # https://huggingface.co/Qwen/Qwen3-8B (8.2B params, 6.95B non-embedding)
        _arch(
            key="qwen3-8b",
            hf_repo="Qwen/Qwen3-8B",
            total_params=8.2e9,
            active_params=8.2e9,
            num_layers=36,
            hidden_size=4096,
            num_attention_heads=32,
            num_kv_heads=8,
            head_dim=128,
            intermediate_size=12288,
            vocab_size=151936,
            max_position_embeddings=40960,
        ),
        # https://huggingface.co/Qwen/Qwen3-14B (14.8B params, 13.2B non-embedding)
        _arch(
            key="qwen3-14b",
            hf_repo="Qwen/Qwen3-14B",
            total_params=14.8e9,
            active_params=14.8e9,
            num_layers=40,
            hidden_size=5120,
            num_attention_heads=40,
            num_kv_heads=8,
            head_dim=128,
            intermediate_size=17408,
            vocab_size=151936,
            max_position_embeddings=40960,
        ),
        # https://huggingface.co/Qwen/Qwen3-32B (32.8B params)
        _arch(
            key="qwen3-32b",
            hf_repo="Qwen/Qwen3-32B",
            total_params=32.8e9,
            active_params=32.8e9,
            num_layers=64,
            hidden_size=5120,
            num_attention_heads=64,
            num_kv_heads=8,
            head_dim=128,
            intermediate_size=25600,
            vocab_size=151936,
            max_position_embeddings=40960,
        ),
        # https://huggingface.co/Qwen/Qwen3-30B-A3B
        # (30.5B total, 3.3B activated, 128 experts, 8 active)
        _arch(
            key="qwen3-30b-a3b",
            hf_repo="Qwen/Qwen3-30B-A3B",
            total_params=30.5e9,
            active_params=3.3e9,
            num_layers=48,
            hidden_size=2048,
            num_attention_heads=32,
            num_kv_heads=4,
            head_dim=128,
            intermediate_size=768,
            vocab_size=151936,
            max_position_embeddings=40960,
            num_experts=128,
            experts_per_token=8,
        ),
        # https://huggingface.co/Qwen/Qwen3-235B-A22B
        # (235B total, 22B activated, 128 experts, 8 active)
        _arch(
            key="qwen3-235b-a22b",
            hf_repo="Qwen/Qwen3-235B-A22B",
            total_params=235e9,
            active_params=22e9,
            num_layers=94,
            hidden_size=4096,
            num_attention_heads=64,
            num_kv_heads=4,
            head_dim=128,
            intermediate_size=1536,
            vocab_size=151936,
            max_position_embeddings=40960,
            num_experts=128,
            experts_per_token=8,
        ),
        # https://huggingface.co/mistralai/Mixtral-8x7B-Instruct-v0.1 (46.7B total, 12.9B active)
        _arch(
            key="mixtral-8x7b",
            hf_repo="mistralai/Mixtral-8x7B-Instruct-v0.1",
            total_params=46.7e9,
            active_params=12.9e9,
            num_layers=32,
            hidden_size=4096,
            num_attention_heads=32,
            num_kv_heads=8,
            head_dim=128,
            intermediate_size=14336,
            vocab_size=32000,
            max_position_embeddings=32768,
            num_experts=8,
            experts_per_token=2,
        ),
        # https://huggingface.co/deepseek-ai/DeepSeek-V3 (671B total + 14B MTP module not
        # served here, 37B activated; MLA with kv_lora_rank 512, a 64-wide RoPE key and the query
        # compressed to q_lora_rank 1536;
        # 256 routed experts, 8 per token; published in FP8. head_dim is the value head width;
        # query/key heads are 192 wide with RoPE, which only the attention-FLOP estimate sees)
        _arch(
            key="deepseek-v3",
            hf_repo="deepseek-ai/DeepSeek-V3",
            total_params=671e9,
            active_params=37e9,
            num_layers=61,
            hidden_size=7168,
            num_attention_heads=128,
            num_kv_heads=128,
            head_dim=128,
            intermediate_size=2048,
            vocab_size=129280,
            max_position_embeddings=163840,
            weight_dtype="fp8",
            # quantization_config: fp8, weight_block_size [128, 128]; the dense layers'
            # intermediate_size 18432
            weight_block=(128, 128),
            dense_intermediate_size=18432,
            attention="mla",
            kv_lora_rank=512,
            qk_rope_head_dim=64,
            q_lora_rank=1536,
            num_experts=256,
            experts_per_token=8,
            # first_k_dense_replace 3; n_group 8, topk_group 4 (config.json)
            dense_layers=3,
            expert_groups=8,
            expert_groups_per_token=4,
        ),
        # https://huggingface.co/openai/gpt-oss-20b (20.9B total, 3.6B active; MXFP4 experts,
        # BF16 attention; 32 experts, 4 per token; every other layer a 128-token window)
        _arch(
            key="gpt-oss-20b",
            hf_repo="openai/gpt-oss-20b",
            total_params=20.9e9,
            active_params=3.6e9,
            num_layers=24,
            hidden_size=2880,
            num_attention_heads=64,
            num_kv_heads=8,
            head_dim=64,
            intermediate_size=2880,
            vocab_size=201088,
            max_position_embeddings=131072,
            expert_weight_dtype="mxfp4",
            num_experts=32,
            experts_per_token=4,
            sliding_window_layers=12,
            attention_layers=[
                {"kind": "sliding", "layers": 12, "window": 128},
                {"kind": "full", "layers": 12},
            ],
            attention_sinks=True,
        ),
        # https://huggingface.co/openai/gpt-oss-120b (116.8B total, 5.1B active; MXFP4 experts,
        # BF16 attention; 128 experts, 4 per token; every other layer a 128-token window)
        _arch(
            key="gpt-oss-120b",
            hf_repo="openai/gpt-oss-120b",
            total_params=116.8e9,
            active_params=5.1e9,
            num_layers=36,
            hidden_size=2880,
            num_attention_heads=64,
            num_kv_heads=8,
            head_dim=64,
            intermediate_size=2880,
            vocab_size=201088,
            max_position_embeddings=131072,
            expert_weight_dtype="mxfp4",
            num_experts=128,
            experts_per_token=4,
            sliding_window_layers=18,
            attention_layers=[
                {"kind": "sliding", "layers": 18, "window": 128},
                {"kind": "full", "layers": 18},
            ],
            attention_sinks=True,
        ),
    )
}
