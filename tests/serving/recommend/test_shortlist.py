"""`plan --recommend` leads with its answer and shows a short list: at most ten rows, the top few
and every near-tie, none of them a layout the policy pack refuses."""

from __future__ import annotations

import pytest
from pack_support import pack_refusals

from infra.platform.config import load_stack
from serving.catalog import ARCHITECTURES
from serving.recommend.ranking import candidate_spec, catalog_spec, recommend
from serving.recommend.shortlist import MAX_SHOWN, TOP_FEW, shortlist
from serving.spec.profile import ModelSpec

ITL, TTFT = 0.05, 2.0


@pytest.fixture(scope="module")
def shipped_70b() -> ModelSpec:
    return load_stack("prod").profiles["llama-3.3-70b-fp8"]


def test_the_shipped_70b_shows_at_most_ten_rows_none_refused_by_the_pack(
    shipped_70b: ModelSpec,
) -> None:
    ranked = recommend(shipped_70b, ITL, TTFT)
    answer = shortlist(ranked, ITL, TTFT)
    assert 1 <= len(answer.shown) <= MAX_SHOWN < len(ranked)
    assert answer.winner is ranked[0] and answer.shown[0] is ranked[0]
    for candidate in answer.shown:
        assert pack_refusals(candidate_spec(shipped_70b, candidate)) == [], candidate.layout
    # The ranking holds layouts the pack refuses; the short list leaves every one of them out.
    refused = [c for c in ranked if c.refused_by is not None]
    assert refused and pack_refusals(candidate_spec(shipped_70b, refused[0]))
    assert not any(c.refused_by for c in answer.shown)
    assert "--all" in answer.not_shown


def test_every_near_tie_is_shown_and_the_top_few_at_least(shipped_70b: ModelSpec) -> None:
    # The first catalog model whose ranking holds near-ties (which one does moves with the
    # machine catalog's prices).
    ranked = next(
        found
        for found in (recommend(catalog_spec(key), ITL, TTFT) for key in sorted(ARCHITECTURES))
        if sum(c.tie for c in found) >= 2
    )
    answer = shortlist(ranked, ITL, TTFT)
    ties = [c for c in ranked if c.tie]
    assert all(c in answer.shown for c in ties[: MAX_SHOWN - 1])
    in_running = [c for c in ranked if c.meets_targets]
    assert len(answer.shown) >= min(TOP_FEW, len(in_running))
    # The top of the ranking, then each other GPU's cheapest layout.
    prefix = 0
    while prefix < len(answer.shown) and answer.shown[prefix] is in_running[prefix]:
        prefix += 1
    top, extra = answer.shown[:prefix], answer.shown[prefix:]
    assert len(top) >= min(TOP_FEW, len(in_running))
    assert [c.accelerator for c in extra] == sorted(
        {c.accelerator for c in in_running} - {c.accelerator for c in top},
        key=lambda gpu: next(c.rank for c in in_running if c.accelerator == gpu),
    )
    for candidate in extra:
        assert candidate is next(c for c in in_running if c.accelerator == candidate.accelerator)


def test_all_lists_every_candidate_refused_ones_too(shipped_70b: ModelSpec) -> None:
    ranked = recommend(shipped_70b, ITL, TTFT)
    assert shortlist(ranked, ITL, TTFT, show_all=True).shown == ranked


def test_what_would_change_it_names_the_price_that_hands_the_win_to_another_machine(
    shipped_70b: ModelSpec,
) -> None:
    """The price the answer names is where the rival really overtakes (cost is linear in it)."""
    ranked = recommend(shipped_70b, ITL, TTFT)
    winner = ranked[0]
    (line,) = [c for c in shortlist(ranked, ITL, TTFT).changes if c.startswith("prices")]
    rival = next(c for c in ranked if c.meets_targets and c.machine_type != winner.machine_type)
    threshold = float(line.split(f"{rival.machine_type} at $")[1].split("/")[0].replace(",", ""))
    cheaper = recommend(shipped_70b, ITL, TTFT, {rival.machine_type: threshold * 0.99})
    assert (cheaper[0].machine_type, cheaper[0].layout) == (rival.machine_type, rival.layout)
    dearer = recommend(shipped_70b, ITL, TTFT, {rival.machine_type: threshold * 1.01})
    assert (dearer[0].machine_type, dearer[0].layout) == (winner.machine_type, winner.layout)


def test_a_ttft_target_below_the_winners_hands_the_win_to_the_one_named(
    shipped_70b: ModelSpec,
) -> None:
    ranked = recommend(shipped_70b, ITL, TTFT)
    winner = ranked[0]
    (line,) = [c for c in shortlist(ranked, ITL, TTFT).changes if c.startswith("a TTFT")]
    tighter = recommend(shipped_70b, ITL, winner.ttft_s * 0.999)
    assert f"then {tighter[0].machine_type} {tighter[0].layout} wins" in line


def test_with_nothing_meeting_the_targets_there_is_no_winner_and_no_refused_row(
    shipped_70b: ModelSpec,
) -> None:
    ranked = recommend(shipped_70b, 0.001, TTFT)
    answer = shortlist(ranked, 0.001, TTFT)
    assert answer.winner is None and answer.shown
    assert all(c.refused_by is None and not c.meets_targets for c in answer.shown)
    assert "none of the" in answer.why


def test_with_every_row_a_tie_the_other_gpus_still_fit_in_ten_rows(
    shipped_70b: ModelSpec,
) -> None:
    # Near-ties fill the list up to its cap; the other GPUs' cheapest rows then push runners-up
    # out rather than the list past MAX_SHOWN.
    ranked = recommend(shipped_70b, ITL, TTFT)
    ranked = [c.model_copy(update={"tie": c.meets_targets and c.rank > 1}) for c in ranked]
    in_running = [c for c in ranked if c.meets_targets]
    gpus = {c.accelerator for c in in_running}
    assert len(in_running) > MAX_SHOWN and 1 < len(gpus) < MAX_SHOWN
    answer = shortlist(ranked, ITL, TTFT)
    assert len(answer.shown) == MAX_SHOWN
    assert {c.accelerator for c in answer.shown} == gpus
    assert answer.shown[0] is in_running[0]
