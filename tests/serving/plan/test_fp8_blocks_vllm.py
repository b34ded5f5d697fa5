"""The planner's whole-block rule (serving.plan.rules.layouts.split_block) against vLLM 0.22's own
check, run here: `validate_fp8_block_shape` (quantization/utils/fp8_utils.py), which every
block-FP8 linear layer calls when vLLM builds it, judges a dense MLP's merged gate/up projection
(column-parallel) and its down projection (row-parallel) at each width, tensor size and block
shape; the planner must refuse exactly the splits vLLM refuses. The MoE layer's own check
(Fp8MoEMethod.create_weights) needs a built FusedMoE layer and is not run here."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest
from planner_support import spec

from serving import catalog
from serving.plan.rules.layouts import split_block

HIDDEN = 4096
WIDTHS = (768, 1408, 1472, 1480, 1536, 14336, 28736)
TENSORS = (1, 2, 4, 8)
BLOCKS = ((128, 128), (64, 128), (128, 64))


def _vllm_loads(
    monkeypatch: pytest.MonkeyPatch, width: int, tensor: int, block: tuple[int, int]
) -> bool:
    import vllm.distributed
    from vllm.model_executor.layers.quantization.utils.fp8_utils import validate_fp8_block_shape

    # The function reads the tensor size from the layer, but evaluates the process group's
    # size as getattr's default all the same: no group exists in a test process.
    monkeypatch.setattr(vllm.distributed, "get_tensor_model_parallel_world_size", lambda: tensor)
    layer = SimpleNamespace(tp_size=tensor)
    shard = width // tensor
    try:
        # gate_up_proj: MergedColumnParallelLinear, two outputs of the MLP width, each split
        validate_fp8_block_shape(layer, HIDDEN, 2 * width, HIDDEN, [shard, shard], list(block))
        # down_proj: RowParallelLinear, its input the MLP width, split
        validate_fp8_block_shape(layer, width, HIDDEN, shard, [HIDDEN], list(block))
    except ValueError:
        return False
    return True


@pytest.mark.parametrize(
    ("width", "tensor", "block"),
    [case for case in itertools.product(WIDTHS, TENSORS, BLOCKS) if case[0] % case[1] == 0],
)
def test_the_planner_refuses_the_dense_splits_vllm_refuses(
    monkeypatch: pytest.MonkeyPatch, width: int, tensor: int, block: tuple[int, int]
) -> None:
    arch = catalog.architecture("llama-3.1-8b").model_dump(mode="json") | {
        "key": "inline", "weight_dtype": "fp8", "weight_block": list(block),
        "intermediate_size": width,
    }  # fmt: skip
    model = spec(architecture=arch, parallelism={"tensor": tensor})
    planner_loads = split_block(model, model.parallelism) is None
    assert planner_loads == _vllm_loads(monkeypatch, width, tensor, block)
