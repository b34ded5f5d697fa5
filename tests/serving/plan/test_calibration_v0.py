"""vLLM's V0 engine in the calibration set: rows measured on vLLM before 0.8 ran V0 (V1 was
opt-in there with VLLM_USE_V1=1, which none of their sources sets), which spent host time on
every engine step beyond what V1 spends. The fit prices it in a term of its own,
fitted.V0_STEP_OVERHEAD_S, added to a step's fixed cost (fitted.STEP_OVERHEAD_S) only while a V0
row is estimated (calibration_score.v0_host_time), so that it does not leak into the constants
that plan V1 servers. Worked by hand at round values of the two constants: V1's fixed cost
0.5 ms a step, V0's extra 2 ms."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from calibration_row import ASYNC, Engine, Row, _p
from calibration_score import estimate
from calibration_set import ROWS
from calibration_set_accelmark import ACCELMARK_ROWS
from repo import REPO

from serving.plan import fitted

V1_STEP_S = 0.5e-3
V0_EXTRA_S = 2e-3


@pytest.fixture(autouse=True)
def _round_constants(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fitted, "STEP_OVERHEAD_S", V1_STEP_S)
    monkeypatch.setattr(fitted, "V0_STEP_OVERHEAD_S", V0_EXTRA_S)


def _batch_8_decode(engine: Engine, **extra: object) -> Row:
    """`vllm bench latency`'s fixed batch of 8 (not a closed loop): one decode step a token."""
    profile = _p("llama-3.1-8b", "h100-80gb", workload=(32, 128)) | extra
    return Row("hand", "Llama-3.1-8B, 1xH100", "tpot", 10.0, profile, "held", batch=8,
               engine=engine)  # fmt: skip


def test_a_v0_decode_step_pays_v0s_host_time_once() -> None:
    """A synchronous decode step pays its fixed cost once: 0.5 ms under V1, 0.5 + 2 = 2.5 ms
    under V0, so V0's time per output token is V1's plus 2 ms, and everything else the step
    costs (weights, KV cache, per-sequence work) is the same."""
    v1 = estimate(_batch_8_decode("v1"))
    v0 = estimate(_batch_8_decode("v0"))
    assert v0 - v1 == pytest.approx(2.0)  # ms
    # and the V1 step carries V1's 0.5 ms: with no fixed cost at all it is 0.5 ms shorter
    fitted.STEP_OVERHEAD_S = 0.0
    assert v1 - estimate(_batch_8_decode("v1")) == pytest.approx(0.5)


def test_a_v0_prefill_pays_v0s_host_time_once_a_chunk() -> None:
    """AccelMark's suite D prompt, 28,650 tokens, in vLLM 0.7's budget of max_model_len =
    30,208 tokens a step: one chunk, V1's estimate plus 2 ms. In a budget of 8,192 tokens the
    same prompt takes ceil(28,650 / 8,192) = 4 chunks, each paying V0's 2 ms: 8 ms more."""
    row = ACCELMARK_ROWS[0]
    assert row.engine == "v0" and row.metric == "prefill"
    assert estimate(row) - estimate(replace(row, engine="v1")) == pytest.approx(2.0)
    chunked = replace(row, profile=row.profile | {"max_num_batched_tokens": 8192})
    assert estimate(chunked) - estimate(replace(chunked, engine="v1")) == pytest.approx(8.0)


def test_the_v0_term_is_gone_once_the_row_is_estimated() -> None:
    """The planner's own constant is V1's again after a V0 row, whatever the row raised."""
    estimate(_batch_8_decode("v0"))
    assert fitted.STEP_OVERHEAD_S == V1_STEP_S
    broken = replace(_batch_8_decode("v0"), metric="total_tps")  # states no number of prompts
    with pytest.raises(AssertionError):
        estimate(broken)
    assert fitted.STEP_OVERHEAD_S == V1_STEP_S


def test_async_scheduling_would_hide_it_and_no_v0_row_has_it() -> None:
    """Async scheduling hides a decode step's fixed cost behind the GPU's previous step, V0's
    extra with it: the V0 rows are synchronous, as V0 always scheduled (vLLM's async scheduling
    is a V1 feature)."""
    hidden = _batch_8_decode("v0", **ASYNC)
    assert estimate(hidden) == pytest.approx(estimate(replace(hidden, engine="v1")))
    assert all(not row.spec().fast_paths.ray_v2_executor for row in ROWS if row.engine == "v0")


def test_a_rows_engine_is_the_one_its_stated_vllm_version_ran() -> None:
    """vLLM 0.7.x (AccelMark's 0.7.3, dstack's 0.7.4 nightly) is V0, and its rows say so; every
    other row names a later vLLM, or none (V1 assumed)."""
    for row in ROWS:
        stated = re.search(r"vLLM (0\.\d+)", row.setup)
        v0 = stated is not None and stated.group(1) in ("0.5", "0.6", "0.7")
        assert (row.engine == "v0") == v0, row.label
        assert ("(V0)" in row.setup) == v0, row.label
    assert any(row.engine == "v0" for row in ROWS)


def test_the_planner_never_reads_the_v0_term() -> None:
    """Only the generated module that holds it names it under serving/."""
    naming = [
        path.relative_to(REPO).as_posix()
        for path in (REPO / "serving").rglob("*.py")
        if "V0_STEP_OVERHEAD_S" in path.read_text()
    ]
    assert naming == ["serving/plan/fitted.py"]
