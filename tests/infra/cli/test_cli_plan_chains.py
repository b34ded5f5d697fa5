"""`servestack plan` for a model served through a capacity chain: the $ per million output
tokens of each step (its machine type, its way's price) and the chain's worst step, in text and
--json, on the shipped h200 stack and on chains edited from it. Expected figures are derived
from the plan and the catalog's per-mode prices (cost per token is linear in the node price)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_support import copy_repo, edit_yaml, run

from infra.platform.chain_costs import recommended_chain_costs
from infra.platform.config import load_stack
from serving.catalog import MACHINE_TYPES
from serving.recommend.ranking import (
    DEFAULT_ITL_TARGET_S,
    DEFAULT_TTFT_TARGET_S,
    plan_on,
    recommend,
)

H200 = MACHINE_TYPES["a3-ultragpu-8g"]


def plan_json(root: Path, stack: str) -> dict[str, Any]:
    result = run(root, "plan", stack, "--json")
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


@pytest.fixture(scope="module")
def h200(pristine: Path) -> dict[str, Any]:
    return plan_json(pristine, "h200")


def test_each_step_of_the_h200_chain_is_priced_its_way(h200: dict[str, Any]) -> None:
    (model_plan,) = h200["plans"]
    (chain,) = h200["chains"]
    assert chain["model"] == model_plan["model"] and chain["chain_of"] == "a3-ultragpu-8g"
    planned = model_plan["usd_per_million_output_tokens"]
    by_mode = {step["mode"]: step for step in chain["steps"]}
    assert [step["mode"] for step in chain["steps"]] == [
        "reservation", "flex_start", "spot", "on_demand"
    ]  # fmt: skip
    # A reservation's nodes bill at the list rate, as on-demand ones do: the plan's own cost.
    assert by_mode["reservation"]["usd_per_million_output_tokens"] == pytest.approx(planned)
    assert by_mode["on_demand"]["usd_per_million_output_tokens"] == pytest.approx(planned)
    spot = by_mode["spot"]
    assert spot["node_price_per_hour_usd"] == H200.spot_price_per_hour_usd
    assert spot["usd_per_million_output_tokens"] == pytest.approx(
        planned * H200.spot_price_per_hour_usd / H200.price_per_hour_usd
    )
    # No flex-start price is published: the step says so and is not counted.
    flex = by_mode["flex_start"]
    assert flex["usd_per_million_output_tokens"] is None and "servestack:prices" in flex["note"]
    assert chain["unpriced_steps"] == [flex["step"]]
    # The worst step is the dearest priced one, the later on a tie: on demand, the fall-back.
    assert chain["worst_step"] == by_mode["on_demand"]["step"]
    assert chain["worst_usd_per_million_output_tokens"] == pytest.approx(planned)


def test_the_text_names_every_step_and_the_worst(pristine: Path) -> None:
    result = run(pristine, "plan", "h200")
    assert result.returncode == 0, result.stderr
    out = " ".join(result.stdout.split())
    assert "through the a3-ultragpu-8g capacity chain" in out
    assert "worst step: 4 (on-demand)" in out
    assert "step(s) 2 have no known price" in out


def test_a_stack_price_for_flex_start_prices_that_step_and_can_make_it_the_worst(
    tmp_path: Path,
) -> None:
    root = copy_repo(tmp_path / "repo")
    edit_yaml(
        root / "stacks/Pulumi.h200.yaml",
        lambda doc: doc["config"].update(
            {"servestack:prices": {"a3-ultragpu-8g:flex_start": 100.0}}
        ),
    )
    document = plan_json(root, "h200")
    (chain,) = document["chains"]
    (model_plan,) = document["plans"]
    flex = chain["steps"][1]
    assert flex["usd_per_million_output_tokens"] == pytest.approx(
        model_plan["usd_per_million_output_tokens"] * 100.0 / H200.price_per_hour_usd
    )
    assert chain["unpriced_steps"] == [] and chain["worst_step"] == 1


def test_a_step_on_a_smaller_node_of_the_same_gpu_packs_fewer_replicas_per_node(
    tmp_path: Path,
) -> None:
    """The prod 70B (TP=2) on a chain of a3-highgpu-8g on demand, then Spot a3-highgpu-4g: the
    Spot step costs the 4-GPU node's Spot price over its two replicas."""
    root = copy_repo(tmp_path / "repo")

    def chain(doc: dict[str, Any]) -> None:
        pool = {"zones": ["us-central1-a"], "capacity": [
            {"on_demand": {}}, {"spot": {}, "machine_type": "a3-highgpu-4g"},
        ]}  # fmt: skip
        doc["config"]["servestack:models"] = ["llama-3.3-70b-fp8"]
        doc["config"]["servestack:gpu_pools"] = {"a3-highgpu-8g": pool}

    edit_yaml(root / "stacks/Pulumi.prod.yaml", chain)
    document = plan_json(root, "prod")
    (model_plan,) = document["plans"]
    (chain_cost,) = document["chains"]
    group = model_plan["groups"][0]
    tokens_per_hour = model_plan["output_tokens_per_s"] * 3600
    small = MACHINE_TYPES["a3-highgpu-4g"]
    replicas = small.gpus_per_node // group["placement"]["gpus_per_replica"]
    spot = chain_cost["steps"][1]
    assert spot["machine_type"] == "a3-highgpu-4g"
    assert spot["usd_per_million_output_tokens"] == pytest.approx(
        small.spot_price_per_hour_usd / replicas / tokens_per_hour * 1e6
    )


def test_a_stack_without_a_chain_has_no_chain_costs(tmp_path: Path) -> None:
    root = copy_repo(tmp_path / "repo")
    spot = {"servestack:gpu_pools": {"a3-highgpu-1g": {"spot": True}}}
    edit_yaml(root / "stacks/Pulumi.dev.yaml", lambda doc: doc["config"].update(spot))
    assert plan_json(root, "dev")["chains"] == []


def test_devs_chain_prices_spot_and_names_flex_start_unpriced(pristine: Path) -> None:
    (chain,) = plan_json(pristine, "dev")["chains"]
    spot, flex = chain["steps"]
    assert (spot["mode"], flex["mode"]) == ("spot", "flex_start")
    assert spot["node_price_per_hour_usd"] == MACHINE_TYPES["a3-highgpu-1g"].spot_price_per_hour_usd
    assert chain["worst_step"] == 0 and chain["unpriced_steps"] == [1]


def test_recommend_prices_the_best_layout_on_each_chain_at_every_step(pristine: Path) -> None:
    stack = load_stack("prod", pristine)
    spec = stack.profiles["llama-3.3-70b-fp8"]
    ranked = recommend(spec, DEFAULT_ITL_TARGET_S, DEFAULT_TTFT_TARGET_S, stack.config.prices)
    (chain,) = recommended_chain_costs(stack, spec, ranked, DEFAULT_ITL_TARGET_S)
    assert chain.chain_of == "a3-highgpu-8g"
    # The cheapest H100 layout within the targets, planned on the chain's 8-GPU node.
    best = min(
        (c for c in ranked if c.meets_targets and c.accelerator == "h100-80gb"),
        key=lambda c: c.rank,
    )
    machine = MACHINE_TYPES["a3-highgpu-8g"]
    planned = plan_on(spec, best, machine, stack.config.prices, DEFAULT_ITL_TARGET_S)
    reservation, _, on_demand = chain.steps
    assert reservation.usd_per_million_output_tokens == pytest.approx(
        planned.usd_per_million_output_tokens
    )
    assert chain.worst_step == on_demand.step == 2
    result = run(pristine, "plan", "prod", "--recommend", "llama-3.3-70b-fp8")
    out = " ".join(result.stdout.split())
    assert "llama-3.3-70b-fp8 through the a3-highgpu-8g capacity chain" in out
    assert "worst step: 3 (on-demand)" in out
