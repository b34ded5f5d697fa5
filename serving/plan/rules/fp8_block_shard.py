"""fp8-block-shard: FP8 weights scaled in blocks (DeepSeek's and Qwen's FP8 releases, 128 x 128)
split over tensor parallelism only at whole blocks; vLLM refuses anything else when it loads
the model (https://github.com/vllm-project/vllm/issues/17569: Qwen3's 1,536-wide experts over 8
GPUs, 192 rows each)."""

from __future__ import annotations

from serving.plan.rules.layouts import split_block
from serving.plan.rules.verdict import Case, Finding, Rule


def fp8_block_shard(case: Case) -> Finding | None:
    spec, layout = case.spec, case.layout
    split = split_block(spec, layout)
    if split is None:
        return None
    what, width, ways = split
    assert spec.weight_block is not None
    rows, columns = spec.weight_block
    experts = " (or expert=true: each expert whole on one rank)" if what == "expert" else ""
    return Finding(
        f"tensor={layout.tensor} splits {spec.architecture.key}'s {width:,}-wide {what} into "
        f"shards of {width / ways:g}, not whole {rows}x{columns} blocks of its FP8 scales: "
        f"vLLM refuses to load it — {case.use}{experts}",
        case.smallest,
    )


RULE = Rule(
    code="fp8-block-shard",
    severity="error",
    field="parallelism.tensor",
    meaning="TP splits an MLP or expert width of block-scaled FP8 weights into shards that are "
    "not whole blocks",
    judge=fp8_block_shard,
)
