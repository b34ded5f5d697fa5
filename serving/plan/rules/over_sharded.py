"""over-sharded: a layout that fits uses no more GPUs of one node than the smallest that fits."""

from __future__ import annotations

from serving.plan.rules.layouts import describe
from serving.plan.rules.verdict import Case, Finding, Rule


def over_sharded(case: Case) -> Finding | None:
    layout, smallest = case.layout, case.smallest
    # A layout that does not fit is does-not-fit's; one that spans nodes is needless-span's.
    if (
        not case.mem.fits
        or smallest is None
        or smallest.gpus_per_replica >= layout.gpus_per_replica
        or layout.gpus_per_replica > case.per_node
    ):
        return None
    return Finding(
        f"{case.spec.architecture.key} fits on {smallest.gpus_per_replica} GPU(s) with "
        f"{describe(smallest)}; {describe(layout)} uses {layout.gpus_per_replica} — more "
        "replicas of the smaller layout serve more requests for the same GPUs",
        smallest,
    )


RULE = Rule(
    code="over-sharded",
    severity="warning",
    field="parallelism",
    meaning="the model fits on fewer GPUs inside the node",
    judge=over_sharded,
)
