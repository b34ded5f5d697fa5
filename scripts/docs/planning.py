"""The planner's pages' tables: its error against the held-back published runs (scored by
tests/calibration_score.py over tests/calibration_set.py) and the autoscaling knobs it derives
for every shipped profile (`serving.compile.autoscaling.knobs_table`)."""

from __future__ import annotations

from scripts.docs.regions import ROOT, Maker, anywhere


def planner_error_table() -> str:
    from calibration_score import readme_error_table

    return readme_error_table()


def autoscaling_table() -> str:
    from serving.compile.autoscaling import knobs_table
    from serving.spec.loading import load_profile

    profiles = sorted((ROOT / "stacks" / "models").glob("*.yaml"))
    return knobs_table([load_profile(path) for path in profiles]).rstrip("\n")


REGIONS: dict[str, Maker] = {
    "planner-error": anywhere(planner_error_table),
    "autoscaling": anywhere(autoscaling_table),
}
