"""The planner's KV cache against the one vLLM 0.22 lays out: tiny configs of each family, made
from the stored config.json files, started with vLLM's CPU build in one process (dummy weights,
eager mode, tests/vllm_kv_probe.py), and the planner's groups, blocks and concurrency for the
same config, block size and memory set beside vLLM's own.

The CPU build runs full attention (Llama, Qwen3 MoE), sliding windows (Gemma 3, gpt-oss with its
sinks), chunked attention (Llama 4) and Gated DeltaNet (Qwen3-Next, whose prefix caching the CPU
platform turns off). It cannot run MLA (DeepSeek, Kimi K2, V3.2's indexer): "MLA is not
supported on CPU" (vllm/platforms/cpu.py); test_kv_cache.py works those by hand, and the test
below checks that the CPU build still refuses them, so that the day it runs them this test asks
for the comparison.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
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
        max_model_len=2048,
        max_num_batched_tokens=256,
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
    held = cache.sequences(vllm["num_blocks"], 2048)
    assert held == pytest.approx(vllm["max_concurrency"], rel=1e-9)


@pytest.mark.parametrize("family", sorted(CPU_CANNOT_RUN))
def test_the_cpu_build_still_cannot_run(family: str, probed: dict[str, Any]) -> None:
    assert "error" in probed[family], f"vLLM's CPU build now runs {family}: compare it above"
