"""`plan --recommend`: machines and layouts ranked by cost within latency targets."""

from __future__ import annotations

from serving.catalog import MACHINE_TYPES, NODE_POOLS_ATTACH_GPU_NETWORK
from serving.plan.accuracy import error_band
from serving.recommend.ranking import catalog_spec, recommend
from serving.spec.profile import ModelSpec


def llama_70b_fp8() -> ModelSpec:
    return ModelSpec.model_validate(
        {
            "name": "llama-3.3-70b-fp8",
            "source": "org/model",
            "architecture": "llama-3.3-70b",
            "quantization": "fp8",
            "accelerator": "h100-80gb",
            "parallelism": {"tensor": 2},
            "max_model_len": 32768,
            "workload": {"input_tokens": 2000, "output_tokens": 300},
        }
    )


def test_winner_is_the_cheapest_layout_within_targets() -> None:
    ranked = recommend(llama_70b_fp8(), itl_target_s=0.05, ttft_target_s=2.0)
    winner = ranked[0]
    assert winner.rank == 1 and winner.reason.startswith("cheapest")
    eligible = [
        c for c in ranked if c.reason.startswith(("cheapest",)) or "winner's cost" in c.reason
    ]
    assert all(
        winner.usd_per_million_output_tokens <= c.usd_per_million_output_tokens  # type: ignore[operator]
        for c in eligible
    )
    assert winner.itl_at_batch_s <= 0.05 and winner.ttft_s <= 2.0


def test_every_loser_says_why() -> None:
    ranked = recommend(llama_70b_fp8(), itl_target_s=0.05, ttft_target_s=2.0)
    reasons = [c.reason for c in ranked[1:]]
    assert all(reasons)
    # a single A100 40GB cannot hold 70B parameters even in FP8
    a100_tp1 = next(
        c for c in ranked if c.machine_type == "a2-highgpu-1g" and c.layout == "TP=1 PP=1"
    )
    assert "does not fit" in a100_tp1.reason or "needs" in a100_tp1.reason


def test_unreachable_latency_target_disqualifies_everything() -> None:
    ranked = recommend(llama_70b_fp8(), itl_target_s=0.001, ttft_target_s=2.0)
    assert not any(c.reason.startswith("cheapest") for c in ranked)
    assert any("above the 1 ms target" in c.reason for c in ranked)


def test_moe_candidates_include_data_plus_expert_parallel_layouts() -> None:
    qwen = ModelSpec.model_validate(
        {
            "name": "qwen3-30b-a3b",
            "source": "Qwen/Qwen3-30B-A3B",
            "architecture": "qwen3-30b-a3b",
            "accelerator": "h100-80gb",
            "max_model_len": 32768,
        }
    )
    layouts = {c.layout for c in recommend(qwen, itl_target_s=0.05, ttft_target_s=2.0)}
    assert "TP=1 PP=1 DP=8+EP" in layouts


def test_catalog_model_without_a_profile_can_be_ranked() -> None:
    spec = catalog_spec("deepseek-v3")
    assert spec.max_model_len == 8192 and spec.source == "deepseek-ai/DeepSeek-V3"
    ranked = recommend(spec, itl_target_s=0.06, ttft_target_s=2.0)
    winner = ranked[0]
    assert winner.reason.startswith("cheapest")
    # 671B parameters in FP8 need a whole 8-GPU node at least
    assert winner.gpus_per_replica >= 8


def test_an_fp8_kv_cache_profile_is_still_compared_on_a100s_without_it() -> None:
    """The spec refuses an FP8 KV cache on Ampere; the recommender compares A100s as they would
    run, with the default KV cache, rather than dropping them or failing."""
    spec = llama_70b_fp8().model_copy(update={"kv_cache_dtype": "fp8"})
    ranked = recommend(spec, itl_target_s=0.05, ttft_target_s=2.0)
    assert {"a100-80gb", "h100-80gb"} <= {c.accelerator for c in ranked}


def test_moe_dp_ep_spans_nodes_only_where_gpus_have_their_own_nics() -> None:
    ranked = recommend(catalog_spec("deepseek-v3"), itl_target_s=0.06, ttft_target_s=2.0)
    spanning = {
        (c.machine_type, c.layout) for c in ranked if "+EP" in c.layout and c.gpus_per_replica > 8
    }
    # A3 Ultra has RDMA, A3 Mega GPUDirect-TCPXO, A3 High's 8-GPU size GPUDirect-TCPX
    assert ("a3-ultragpu-8g", "TP=1 PP=1 DP=16+EP") in spanning
    assert {machine for machine, _ in spanning} <= {
        m.name for m in MACHINE_TYPES.values() if m.expert_parallel_across_nodes
    }
    assert not MACHINE_TYPES["a2-ultragpu-8g"].expert_parallel_across_nodes
    assert MACHINE_TYPES["a3-ultragpu-8g"].gpu_network == "rdma"
    two_nodes = next(
        c for c in ranked if (c.machine_type, c.layout) == ("a3-ultragpu-8g", "TP=1 PP=1 DP=16+EP")
    )
    assert "winner's cost" in two_nodes.reason or two_nodes.reason.startswith("cheapest")
    caveat = "" if NODE_POOLS_ATTACH_GPU_NETWORK else " (node pools do not attach it yet)"
    assert f"DP+EP over 2 nodes on rdma{caveat}" in two_nodes.reason


def test_candidates_within_the_measured_throughput_error_of_the_winner_are_ties() -> None:
    spec = catalog_spec("qwen3-30b-a3b")
    band = error_band(True, "saturation").band
    ranked = recommend(spec, itl_target_s=0.05, ttft_target_s=2.0)
    winner = ranked[0]
    assert winner.reason.startswith("cheapest") and not winner.tie
    in_the_running = [c for c in ranked[1:] if "winner's cost" in c.reason]
    assert in_the_running
    for candidate in in_the_running:
        assert winner.usd_per_million_output_tokens is not None
        assert candidate.usd_per_million_output_tokens is not None
        ratio = candidate.usd_per_million_output_tokens / winner.usd_per_million_output_tokens
        assert candidate.tie == (ratio - 1 <= band)
        assert ("a tie" in candidate.reason) == candidate.tie
    assert not any(c.tie for c in ranked if "winner's cost" not in c.reason)
