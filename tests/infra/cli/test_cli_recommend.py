"""`servestack plan --recommend`: the recommender's ranking, led by its answer."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from cli_support import run

from infra.platform.config import load_stack
from serving.plan.accuracy import error_band
from serving.recommend.ranking import catalog_spec, recommend

# --- --recommend ----------------------------------------------------------------------------

# The reasons the recommender gives candidates that meet the targets; any other reason says why
# a candidate was disqualified.
_STILL_IN_THE_RUNNING = re.compile(
    r"^(cheapest per million output tokens within the latency targets"
    r"|\d+\.\d\dx the winner's cost"
    r"(; a tie: within the planner's measured ±\d+% throughput error)?)(; DP\+EP over [^;]*)?"
    r"(; beyond the measured runs: .*)?$"
)


@pytest.fixture(scope="module")
def recommended(pristine: Path) -> list[dict[str, Any]]:
    result = run(pristine, "plan", "prod", "--recommend", "llama-3.3-70b-fp8", "--json")
    assert result.returncode == 0, result.stderr
    candidates: list[dict[str, Any]] = json.loads(result.stdout)
    return candidates


def test_recommend_ranks_every_candidate_once_from_1(recommended: list[dict[str, Any]]) -> None:
    assert [c["rank"] for c in recommended] == list(range(1, len(recommended) + 1))


def test_recommend_rank_1_is_the_cheapest_that_meets_the_targets(
    recommended: list[dict[str, Any]],
) -> None:
    in_the_running = [c for c in recommended if _STILL_IN_THE_RUNNING.match(c["reason"])]
    assert in_the_running, "no candidate meets the targets"
    winner = recommended[0]
    assert winner["reason"].startswith("cheapest")
    assert winner["usd_per_million_output_tokens"] == min(
        c["usd_per_million_output_tokens"] for c in in_the_running
    )


def test_recommend_every_loser_says_why_it_lost(recommended: list[dict[str, Any]]) -> None:
    losers = recommended[1:]
    assert losers
    assert all(c["reason"].strip() for c in losers)
    assert not any(c["reason"].startswith("cheapest") for c in losers)


def test_recommend_ranks_candidates_meeting_the_targets_first_cheapest_first(
    recommended: list[dict[str, Any]],
) -> None:
    meeting = [_STILL_IN_THE_RUNNING.match(c["reason"]) is not None for c in recommended]
    assert meeting == sorted(meeting, reverse=True)
    in_the_running = recommended[: sum(meeting)]
    costs = [c["usd_per_million_output_tokens"] for c in in_the_running]
    assert costs == sorted(costs)
    best = costs[0]
    band = error_band(False, "saturation").band
    for candidate in in_the_running[1:]:
        ratio = candidate["usd_per_million_output_tokens"] / best
        assert candidate["reason"].startswith(f"{ratio:.2f}x the winner's cost")
        # within the planner's measured throughput error of the winner: a tie
        assert candidate["tie"] == (ratio - 1 <= band)


def test_recommend_json_is_the_recommenders_ranking(
    recommended: list[dict[str, Any]], pristine: Path
) -> None:
    spec = load_stack("prod", pristine).profiles["llama-3.3-70b-fp8"]
    expected = recommend(spec, itl_target_s=0.050, ttft_target_s=2.0)
    assert recommended == [c.model_dump(mode="json") for c in expected]


def test_recommend_with_a_tighter_latency_target_disqualifies_slower_layouts(
    pristine: Path, recommended: list[dict[str, Any]]
) -> None:
    result = run(
        pristine,
        "plan", "prod", "--recommend", "llama-3.3-70b-fp8", "--json", "--max-itl-ms", "20",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    tight: list[dict[str, Any]] = json.loads(result.stdout)
    winner = tight[0]
    assert winner["reason"].startswith("cheapest")
    assert winner["itl_at_batch_s"] <= 0.020
    assert any("above the 20 ms target" in c["reason"] for c in tight)
    loose_in_the_running = sum(1 for c in recommended if _STILL_IN_THE_RUNNING.match(c["reason"]))
    tight_in_the_running = sum(1 for c in tight if _STILL_IN_THE_RUNNING.match(c["reason"]))
    assert tight_in_the_running < loose_in_the_running


def test_recommend_takes_a_catalog_architecture_the_stack_has_no_profile_for(
    pristine: Path,
) -> None:
    result = run(pristine, "plan", "--recommend", "deepseek-v3", "--json")
    assert result.returncode == 0, result.stderr
    expected = recommend(catalog_spec("deepseek-v3"), itl_target_s=0.050, ttft_target_s=2.0)
    assert json.loads(result.stdout) == [c.model_dump(mode="json") for c in expected]


def test_recommend_with_a_misspelt_architecture_suggests_the_nearest(pristine: Path) -> None:
    result = run(pristine, "plan", "--recommend", "llama-3.3-70")
    assert result.returncode == 2
    assert "llama-3.3-70b" in result.stderr


def _table_rows(stdout: str) -> list[str]:
    """The first cells (rank) of the first rich table's rows (the candidates; the capacity
    chain's table follows it); continuation lines have an empty one."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("┏"))
    end = next(i for i, line in enumerate(lines) if i > start and line.startswith("└"))
    cells = [line.split("│")[1].strip() for line in lines[start:end] if line.startswith("│")]
    return [cell for cell in cells if cell]


def test_recommend_leads_with_its_answer_and_shows_at_most_ten_rows(pristine: Path) -> None:
    result = run(pristine, "plan", "prod", "--recommend", "llama-3.3-70b-fp8")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("recommended: ")
    assert lines.index(next(line for line in lines if line.startswith("┏"))) > lines.index(
        "what would change it:"
    )
    ranks = _table_rows(result.stdout)
    assert 1 <= len(ranks) <= 10 and ranks[0] == "1"
    assert "refused [" not in result.stdout and "--all lists them" in result.stdout
    every = run(pristine, "plan", "prod", "--recommend", "llama-3.3-70b-fp8", "--all")
    listed = _table_rows(every.stdout)
    assert len(listed) == len(json.loads(run(
        pristine, "plan", "prod", "--recommend", "llama-3.3-70b-fp8", "--json"
    ).stdout))  # fmt: skip
    # The reason may wrap inside its cell: "refused" and the rule's code in brackets.
    assert "refused" in every.stdout and "[needless-span]" in every.stdout


# --- B200 beside H100 and H200, with prices per way of obtaining nodes ---------------------


def test_the_shipped_70b_fp8_ranks_b200_beside_h100_and_h200(
    recommended: list[dict[str, Any]],
) -> None:
    in_running = [c for c in recommended if _STILL_IN_THE_RUNNING.match(c["reason"])]
    assert {"b200-180gb", "h200-141gb", "h100-80gb"} <= {c["accelerator"] for c in in_running}


def test_each_candidates_spot_cost_follows_its_spot_price(
    recommended: list[dict[str, Any]],
) -> None:
    """Cost per token is linear in the node price: Spot / list, per machine type."""
    from serving import catalog

    for candidate in recommended:
        machine = catalog.MACHINE_TYPES[candidate["machine_type"]]
        modes = candidate["usd_per_million_by_mode"]
        listed = candidate["usd_per_million_output_tokens"]
        if listed is None:
            continue
        assert modes["spot"] == pytest.approx(
            listed * machine.spot_price_per_hour_usd / machine.price_per_hour_usd
        )
        assert modes["reservation"] == pytest.approx(listed)
        # Not sold on demand (A4, A3 High's small sizes): no on-demand cost; no flex price known.
        assert (modes["on_demand"] is None) == (not machine.on_demand)
        assert modes["flex_start"] is None


def test_the_short_list_shows_every_gpus_cheapest_layout_with_its_spot_cost(
    pristine: Path,
) -> None:
    result = run(pristine, "plan", "prod", "--recommend", "llama-3.3-70b-fp8")
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("│")]
    shown = {row.split("│")[2].strip().rstrip("*") for row in rows if row.split("│")[2].strip()}
    assert {"a4-highgpu-8g", "a3-ultragpu-8g"} <= shown
    assert any(name.startswith("a3-highgpu") for name in shown)
    assert "/Spot: $/M at Spot prices" in " ".join(result.stdout.split())
    assert "a4-highgpu-8g*" in result.stdout
    assert "does not sell on demand" in " ".join(result.stdout.split())


def test_a_price_for_one_mode_moves_only_that_column(pristine: Path) -> None:
    stack = load_stack("prod", pristine)
    spec = stack.profiles["llama-3.3-70b-fp8"]
    before = {(c.machine_type, c.layout): c for c in recommend(spec, 0.05, 2.0)}
    after = recommend(spec, 0.05, 2.0, {"a4-highgpu-8g:spot": 16.305})
    for candidate in after:
        old = before[(candidate.machine_type, candidate.layout)]
        assert candidate.usd_per_million_output_tokens == old.usd_per_million_output_tokens
        if candidate.machine_type == "a4-highgpu-8g" and old.usd_per_million_by_mode["spot"]:
            assert candidate.usd_per_million_by_mode["spot"] == pytest.approx(
                old.usd_per_million_by_mode["spot"] / 2
            )
