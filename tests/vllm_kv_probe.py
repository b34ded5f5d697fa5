"""Start vLLM 0.22's CPU build on tiny configs, one family after another in this one process,
and write the KV cache it laid out for each: its groups, their specs, the blocks and the
maximum concurrency vLLM computed. Run by tests/serving/plan/test_kv_cache_vllm.py:

    python tests/vllm_kv_probe.py OUT.json DIR/family1 DIR/family2 ...

Each DIR/family holds only a config.json: dummy weights, no tokenizer, eager mode.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import vllm_offline

CACHE_GIB = 1
ENV = vllm_offline.env(CACHE_GIB, threads="auto")


def probe(model: Path) -> dict[str, Any]:
    from vllm.v1.core.kv_cache_utils import get_max_concurrency_for_kv_cache_config

    llm = vllm_offline.llm(model, max_num_seqs=2)
    core = llm.llm_engine.engine_core.engine_core
    config = core.scheduler.kv_cache_config
    vllm_config = llm.llm_engine.vllm_config
    groups = []
    for group in config.kv_cache_groups:
        spec = group.kv_cache_spec
        groups.append(
            {
                "spec": type(spec).__name__,
                "layers": len(group.layer_names),
                "block_size": spec.block_size,
                "page_size_bytes": spec.page_size_bytes,
            }
        )
    result = {
        "num_blocks": config.num_blocks,
        "groups": groups,
        "max_concurrency": get_max_concurrency_for_kv_cache_config(vllm_config, config),
        "cache_bytes": CACHE_GIB * 2**30,
        "block_size": vllm_config.cache_config.block_size,
        "hybrid_manager": not vllm_config.scheduler_config.disable_hybrid_kv_cache_manager,
        "prefix_caching": vllm_config.cache_config.enable_prefix_caching,
    }
    core.shutdown()
    return result


def main() -> None:
    out = Path(sys.argv[1])
    results = {}
    for model in map(Path, sys.argv[2:]):
        try:
            results[model.name] = probe(model)
        except Exception as exc:  # a family the CPU build cannot run: say why
            results[model.name] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
    out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    os.environ.update(ENV)
    main()
