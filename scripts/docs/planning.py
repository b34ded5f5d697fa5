"""The planner's pages' tables: its error against the held-back published runs (scored by
tests/calibration_score.py over tests/calibration_set.py) and what those runs exercised
(serving.plan.error_bands.MEASURED_FEATURES), the autoscaling knobs it derives
for every shipped profile (`serving.compile.autoscaling.knobs_table`), and the $ per million
output tokens at each step of every shipped stack's capacity chains
(`infra.platform.chain_costs`), with the date of the prices."""

from __future__ import annotations

from scripts.docs.regions import ROOT, Maker, anywhere


def planner_error_table() -> str:
    from calibration_score import readme_error_table

    return readme_error_table()


def planner_regimes_table() -> str:
    from calibration_score import readme_regime_table

    return readme_regime_table()


def planner_coverage_table() -> str:
    from serving.plan.accuracy import MIN_MEASURING_RUNS
    from serving.plan.error_bands import MEASURED_FEATURES

    rows = ["| what an estimate rests on | held-back runs | covered |", "| --- | ---: | --- |"]
    for feature, runs in sorted(MEASURED_FEATURES.items()):
        covered = "yes" if runs >= MIN_MEASURING_RUNS else f"no (fewer than {MIN_MEASURING_RUNS})"
        rows.append(f"| {feature} | {runs} | {covered} |")
    return "\n".join(rows)


def autoscaling_table() -> str:
    from serving.compile.autoscaling import knobs_table
    from serving.spec.loading import load_profile

    profiles = sorted((ROOT / "stacks" / "models").glob("*.yaml"))
    return knobs_table([load_profile(path) for path in profiles]).rstrip("\n")


def chain_costs_table() -> str:
    from infra.platform.chain_costs import chain_costs
    from infra.platform.config import available_stacks, load_stack
    from serving.catalog import PRICES_AS_OF, SPOT_PRICES_AS_OF, SPOT_PRICES_SOURCE
    from serving.plan.planner import plan

    def usd(value: float | None) -> str:
        return "—" if value is None else f"${value:,.2f}"

    rows = [
        "| stack | model | step | way | machine | $ / node-hour | $ / M output tokens |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name in available_stacks(ROOT):
        stack = load_stack(name, ROOT)
        for spec in stack.profiles.values():
            chain = chain_costs(stack, plan(spec, stack.config.prices))
            if chain is None:
                continue
            for step in chain.steps:
                cost = usd(step.usd_per_million_output_tokens)
                if step.step == chain.worst_step:
                    cost = f"**{cost}** (worst step)"
                elif step.usd_per_million_output_tokens is None:
                    cost = "— (no published price)"
                rows.append(
                    f"| `{name}` | {chain.model} | {step.step + 1} | "
                    f"{step.mode.replace('_', '-')} | {step.machine_type} | "
                    f"{usd(step.node_price_per_hour_usd)} | {cost} |"
                )
    dates = (
        f"Prices: on demand and reservations at the approximate {PRICES_AS_OF} on-demand list "
        f"price in us-central1; Spot as of {SPOT_PRICES_AS_OF}, from [SkyPilot's GCP catalog]"
        f"({SPOT_PRICES_SOURCE}) (Cloud Billing SKUs, GPUs plus VM); flex-start has no published "
        "price in that catalog, so its steps show none and the worst step is the dearest priced "
        "one. `servestack:prices` overrides any of them (`<type>` or `<type>:<mode>`)."
    )
    return "\n".join(rows) + "\n\n" + dates


REGIONS: dict[str, Maker] = {
    "planner-error": anywhere(planner_error_table),
    "planner-regimes": anywhere(planner_regimes_table),
    "planner-coverage": anywhere(planner_coverage_table),
    "autoscaling": anywhere(autoscaling_table),
    "chain-costs": anywhere(chain_costs_table),
}
