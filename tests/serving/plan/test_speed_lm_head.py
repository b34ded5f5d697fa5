"""The embedding and the LM head in the math of a step (roofline.lm_head_flops), worked by hand
from the catalog: the input embedding is a row lookup, never a product; the LM head multiplies
the rows a step samples, every token of a decode step but one row per prompt and step in a
prefill (vLLM 0.22: `compute_logits(hidden_states[logits_indices])`, one index per request).
What a step reads of them likewise: an untied embedding the rows its tokens look up, a head
the whole matrix."""

from __future__ import annotations

import pytest
from planner_support import spec

from serving.catalog import ACCELERATORS
from serving.plan import fitted
from serving.plan.memory import dense_weight_bytes_per_gpu, streamed_weight_bytes_per_gpu
from serving.plan.placement import choose_machine
from serving.plan.speed import PREFILL_MFU, decode, decode_step_s, prefill_compute_s
from serving.plan.speed.roofline import lm_head_flops, matmul_s
from serving.spec.parts import Parallelism
from serving.spec.profile import ModelSpec

H100 = ACCELERATORS["h100-80gb"]
# Llama-3.1-8B: 8.03B parameters, of which the embedding and the LM head are 128,256 x 4,096
# = 525,336,576 each, untied: 8,030,000,000 - 1,050,673,152 = 6,979,326,848 in the layers.
LLAMA_HEAD = 525_336_576
LLAMA_LAYERS = 6_979_326_848


def test_the_lm_head_multiplies_each_sampled_row() -> None:
    """2 FLOPs a weight: 2 x 525,336,576 = 1,050,673,152 a row."""
    llama = spec()
    assert lm_head_flops(llama, 1) == 1_050_673_152
    assert lm_head_flops(llama, 3) == 3 * 1_050_673_152


def test_a_prefill_multiplies_the_layers_per_token_and_the_head_once() -> None:
    """A 4,096-token prompt on one H100 in one step: 2 x 6,979,326,848 x 4,096 FLOPs through the
    layers (5.7175e13) and 1,050,673,152 for its one sampled row, at Hopper's prefill share of
    BF16 peak; counted at 2 x 8.03B a token, as the planner did before, it would be 1.150 times
    as much."""
    llama = spec()
    layout = llama.parallelism
    rate = H100.bf16_dense_flops * PREFILL_MFU[9]
    layers = 2 * LLAMA_LAYERS * 4096 / rate
    head = 2 * LLAMA_HEAD / rate
    assert matmul_s(llama, layout, 4096, PREFILL_MFU[9], sampled=1) == pytest.approx(layers + head)
    with_row = prefill_compute_s(llama, layout, 4096, sampled=1)
    assert with_row - prefill_compute_s(llama, layout, 4096, sampled=0) == pytest.approx(head)
    # the row is the default: the prompt's one step samples it once
    assert prefill_compute_s(llama, layout, 4096) == with_row
    assert (2 * 8.03e9 * 4096 / rate) / (layers + head) == pytest.approx(1.150, abs=0.001)


def test_a_decode_step_multiplies_the_head_for_every_token() -> None:
    """256 sequences decoding on one H100 at full peak: 2 x (6,979,326,848 + 525,336,576) x 256
    FLOPs, the embedding alone left out (2 x 525,336,576 x 256 fewer than 2 x 8.03B x 256)."""
    llama = spec()
    expected = 2 * (LLAMA_LAYERS + LLAMA_HEAD) * 256 / H100.bf16_dense_flops
    assert matmul_s(llama, llama.parallelism, 256, 1.0) == pytest.approx(expected)


def test_a_tied_head_is_looked_up_and_multiplied_from_one_matrix() -> None:
    """Qwen3-0.6B ties its head to its embedding, 151,936 x 1,024 = 155,582,464 weights counted
    once in its 0.596B: the layers are 0.596e9 - 155,582,464 = 440,417,536, and a decode step of
    one token multiplies those and the head, 2 x 0.596e9 FLOPs."""
    qwen = spec(architecture="qwen3-0.6b")
    layers = 440_417_536
    assert matmul_s(qwen, qwen.parallelism, 1, 1.0) == pytest.approx(
        2 * (layers + 155_582_464) / H100.bf16_dense_flops
    )
    assert matmul_s(qwen, qwen.parallelism, 1000, 1.0, sampled=1) == pytest.approx(
        (2 * layers * 1000 + 2 * 155_582_464) / H100.bf16_dense_flops
    )


def test_a_step_reads_the_untied_embedding_a_row_a_token() -> None:
    """vLLM's input embedding gathers one row a token (F.embedding), so a step reads the table's
    looked-up rows, not all of it (memory.streamed_weight_bytes_per_gpu). Llama-3.1-8B in BF16:
    8.03e9 x 2 = 16,060,000,000 bytes of weights, of which the embedding is 525,336,576 x 2 =
    1,050,673,152; 8 sequences decoding look up 8 rows of 4,096 x 2 = 8,192 bytes: 16,060,000,000
    - 1,050,673,152 + 65,536 = 15,009,392,384 bytes a step, 6.5% fewer."""
    llama = spec()
    assert dense_weight_bytes_per_gpu(llama, llama.parallelism) == 16_060_000_000
    assert streamed_weight_bytes_per_gpu(llama, llama.parallelism, 8) == 15_009_392_384


def test_each_tp_rank_reads_its_vocabulary_shard_a_row_a_token() -> None:
    """Llama-3.3-70B at TP 4: 70.55e9 x 2 / 4 = 35,275,000,000 bytes a GPU; its table, 128,256 x
    8,192 x 2 = 2,101,346,304 bytes, is split by vocabulary over the 4 ranks, and 8 tokens' rows
    (8 x 16,384 = 131,072 bytes) are read in all: 35,275,000,000 - (2,101,346,304 - 131,072) / 4
    = 34,749,696,192."""
    llama = spec(architecture="llama-3.3-70b", parallelism={"tensor": 4})
    assert dense_weight_bytes_per_gpu(llama, llama.parallelism) == 35_275_000_000
    assert streamed_weight_bytes_per_gpu(llama, llama.parallelism, 8) == 34_749_696_192


def test_a_tied_table_is_read_whole_by_the_head() -> None:
    """Qwen3-0.6B's head is its embedding: the head multiplies every row each step, so the whole
    0.596e9 x 2 = 1,192,000,000 bytes are read, the lookup adding nothing."""
    qwen = spec(architecture="qwen3-0.6b")
    assert streamed_weight_bytes_per_gpu(qwen, qwen.parallelism, 8) == 1_192_000_000


def test_a_decode_step_streams_the_looked_up_rows_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """One Llama-3.1-8B sequence on an H100 reads 1,050,673,152 - 8,192 = 1,050,664,960 bytes
    fewer than the whole table would cost, at the dense weights' share of 3.35 TB/s."""
    llama = spec()
    machine = choose_machine(llama, 1)
    fewer = decode_step_s(llama, machine, llama.parallelism, 1, 1024)

    def whole_table(model: ModelSpec, layout: Parallelism, tokens: float) -> float:
        return dense_weight_bytes_per_gpu(model, layout)

    monkeypatch.setattr(decode, "streamed_weight_bytes_per_gpu", whole_table)
    whole = decode_step_s(llama, machine, llama.parallelism, 1, 1024)
    assert whole - fewer == pytest.approx(1_050_664_960 / (3.35e12 * fitted.HBM_EFFICIENCY))
