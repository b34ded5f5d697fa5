"""The planner's KV cache against the one vLLM 0.22 lays out: tiny configs of each family, made
from the stored config.json files, started with vLLM's CPU build in one process (dummy weights,
eager mode, tests/vllm_kv_probe.py), and the planner's groups, blocks and concurrency for the
same config, block size and memory set beside vLLM's own.

The CPU build runs full attention (Llama, Qwen3 MoE), sliding windows (Gemma 3, gpt-oss with its
sinks), chunked attention (Llama 4) and Gated DeltaNet (Qwen3-Next, whose prefix caching the CPU
platform turns off). It cannot run MLA (DeepSeek, Kimi K2, V3.2's indexer): "MLA is not
supported on CPU" (vllm/platforms/cpu.py). For those, vLLM's own spec classes of each layer,
as its model code declares them, go through vLLM's own grouping and sizing functions without an
engine; test_kv_cache.py works them by hand too; and a test checks that the CPU build still
refuses them, so that the day it runs them it asks for the engine's comparison.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import vllm_offline
from kv_probe_models import FAMILIES, write_models
from planner_support import spec
from repo import REPO

from serving.catalog.importer import import_architecture, parse_json
from serving.plan import kv_cache
from serving.spec.parts import Parallelism

pytestmark = [pytest.mark.vllm, pytest.mark.xdist_group("vllm-kv-probe")]

CPU_CANNOT_RUN = {"deepseek_v3": "MLA is not supported on CPU"}
KINDS = {
    "FullAttentionSpec": "full",
    "SlidingWindowSpec": "sliding",
    "ChunkedLocalAttentionSpec": "chunked",
    "MambaSpec": "linear",
}


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("kv-probe")
    folders = write_models(root)
    out = root / "probe.json"
    subprocess.run(
        [sys.executable, str(REPO / "tests" / "vllm_kv_probe.py"), str(out)]
        + [str(folders[name]) for name in FAMILIES],
        check=True,
        timeout=900,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def planned(family: str, vllm: dict[str, Any], root: Path) -> kv_cache.KVCacheLayout:
    folders = write_models(root)
    config = folders[family] / "config.json"
    arch = import_architecture(parse_json(config.read_bytes(), str(config)))
    model = spec(
        architecture=arch.model_dump(),
        max_model_len=vllm_offline.MAX_MODEL_LEN,
        max_num_batched_tokens=vllm_offline.BATCHED_TOKENS,
        max_num_seqs=2,
        prefix_caching=vllm["prefix_caching"],
    )
    return kv_cache.layout(model, Parallelism(), block_tokens=vllm["block_size"])


@pytest.mark.parametrize("family", sorted(set(FAMILIES) - set(CPU_CANNOT_RUN)))
def test_the_planner_lays_out_the_cache_vllm_lays_out(
    family: str, probed: dict[str, Any], tmp_path: Path
) -> None:
    vllm = probed[family]
    assert "error" not in vllm, vllm.get("error")
    cache = planned(family, vllm, tmp_path)
    ours = sorted((g.spec.kind, g.layers) for g in cache.groups)
    theirs = sorted((KINDS[g["spec"]], g["layers"]) for g in vllm["groups"])
    assert ours == theirs
    # The memory one block takes: each layer's page in one group, or one page in each of the
    # group_size pools vLLM shares between groups.
    group_size = max(g["layers"] for g in vllm["groups"])
    assert cache.block_bytes == vllm["groups"][0]["page_size_bytes"] * group_size
    assert cache.num_blocks(vllm["cache_bytes"]) == vllm["num_blocks"]
    held = cache.sequences(vllm["num_blocks"], vllm_offline.MAX_MODEL_LEN)
    assert held == pytest.approx(vllm["max_concurrency"], rel=1e-9)


@pytest.mark.parametrize("family", sorted(CPU_CANNOT_RUN))
def test_the_cpu_build_still_cannot_run(family: str, probed: dict[str, Any]) -> None:
    assert "error" in probed[family], f"vLLM's CPU build now runs {family}: compare it above"


def _vllm_config(length: int, batched: int) -> Any:
    """What vLLM's grouping and sizing functions read of a VllmConfig: a stand-in, since
    building the real one resolves an MLA attention backend the CPU build does not have."""
    from types import SimpleNamespace

    return SimpleNamespace(
        cache_config=SimpleNamespace(num_gpu_blocks_override=None, mamba_cache_mode="none"),
        model_config=SimpleNamespace(max_model_len=length),
        parallel_config=SimpleNamespace(
            decode_context_parallel_size=1, prefill_context_parallel_size=1
        ),
        scheduler_config=SimpleNamespace(
            disable_hybrid_kv_cache_manager=False, max_num_batched_tokens=batched
        ),
        kv_transfer_config=None,
        speculative_config=None,
    )


@pytest.mark.parametrize(
    ("sparse", "kv_cache_dtype"),
    [(False, "auto"), (False, "fp8"), (True, "auto"), (True, "fp8")],
    ids=["v3-bf16", "v3-fp8", "v3.2-bf16", "v3.2-fp8"],
)
def test_mla_layers_size_as_vllms_own_spec_classes(sparse: bool, kv_cache_dtype: str) -> None:
    """DeepSeek's MLA, which the CPU build cannot run: vLLM's own MLAAttentionSpec for each
    layer (the latent, V3.2's fp8_ds_mla layout and its indexer's uint8 keys, as
    deepseek_v2.py declares them), grouped and sized by vLLM's own functions."""
    import torch
    from vllm.v1.core.kv_cache_utils import (
        get_kv_cache_config_from_groups,
        get_kv_cache_groups,
        get_max_concurrency_for_kv_cache_config,
    )
    from vllm.v1.kv_cache_interface import MLAAttentionSpec, UniformTypeKVCacheSpecs

    from serving.catalog import architecture as catalog_architecture

    arch = catalog_architecture("deepseek-v3").model_dump()
    if sparse:
        arch["key"] = "deepseek-v3.2"
        arch["attention_layers"] = [
            {"kind": "mla", "layers": 61, "indexer_topk": 2048, "indexer_head_dim": 128}
        ]
    model = spec(
        architecture=arch, max_model_len=32_768, kv_cache_dtype=kv_cache_dtype,
        source="deepseek-ai/DeepSeek-V3",
    )  # fmt: skip
    ours = kv_cache.layout(model, Parallelism(tensor=8))
    block = ours.groups[0].spec.block_tokens
    fp8 = kv_cache_dtype == "fp8"
    layers: dict[str, Any] = {}
    # The latent's spec carries the cache dtype's name (mla_attention.py); FlashMLA's sparse
    # backend turns an FP8 cache into fp8_ds_mla. The indexer's spec names none.
    cache_dtype = ("fp8_ds_mla" if sparse else "fp8") if fp8 else "auto"
    for i in range(61):
        latent = MLAAttentionSpec(
            block_size=block, num_kv_heads=1, head_size=576,
            dtype=torch.uint8 if fp8 else torch.bfloat16, cache_dtype_str=cache_dtype,
        )  # fmt: skip
        layers[f"model.layers.{i}.self_attn.attn"] = latent
        if sparse:
            layers[f"model.layers.{i}.self_attn.indexer.k_cache"] = MLAAttentionSpec(
                block_size=block, num_kv_heads=1, head_size=128 + 128 // 128 * 4, dtype=torch.uint8
            )
    config = _vllm_config(32_768, model.max_num_batched_tokens)
    memory_bytes = 40 * 2**30
    vllm = get_kv_cache_config_from_groups(
        config, get_kv_cache_groups(config, layers), memory_bytes
    )
    (group,) = vllm.kv_cache_groups
    # One spec for all layers: a page per layer; layers of two widths: their pages together.
    uniform = isinstance(group.kv_cache_spec, UniformTypeKVCacheSpecs)
    per_block = group.kv_cache_spec.page_size_bytes * (1 if uniform else len(group.layer_names))
    assert ours.block_bytes == per_block
    assert ours.num_blocks(memory_bytes) == vllm.num_blocks
    concurrency = get_max_concurrency_for_kv_cache_config(config, vllm)
    assert ours.sequences(vllm.num_blocks, 32_768) == pytest.approx(concurrency, rel=1e-9)
