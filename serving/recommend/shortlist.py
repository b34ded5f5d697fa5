"""What `plan --recommend` shows first: the answer (the winner, why it won, what would change
it) and a short list of candidates — the top few, every near-tie and the cheapest layout of
each other GPU — with the rest counted rather than printed.

A layout the planner refuses is never offered: the policy pack's topology policies report the
planner's own verdicts, so a refused layout is one the pack would refuse too. Such layouts, and
those that miss the latency targets, are listed (each with its rule or reason) only when all
candidates are asked for.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from serving import catalog
from serving.recommend.ranking import Candidate

# The winner and enough runners-up to compare on latency; near-ties are shown beyond this, up
# to MAX_SHOWN, since the estimates cannot tell them from the winner.
TOP_FEW = 5
MAX_SHOWN = 10


@dataclass(frozen=True)
class Shortlist:
    winner: Candidate | None
    shown: list[Candidate]
    why: str
    changes: list[str] = field(default_factory=list)
    not_shown: str = ""


def shortlist(
    ranked: list[Candidate],
    itl_target_s: float,
    ttft_target_s: float,
    prices: Mapping[str, float] | None = None,
    *,
    show_all: bool = False,
) -> Shortlist:
    """The answer and the rows to show, from the recommender's ranking (best first)."""
    in_running = [c for c in ranked if c.meets_targets]
    targets = f"ITL ≤ {itl_target_s * 1e3:g} ms and TTFT ≤ {ttft_target_s * 1e3:g} ms"
    if in_running:
        winner: Candidate | None = in_running[0]
        ties = sum(1 for c in in_running if c.tie)
        shown = _top_with_every_gpu(in_running, min(MAX_SHOWN, max(TOP_FEW, 1 + ties)))
        why = (
            f"the cheapest per million output tokens of the {len(in_running)} layouts that meet "
            f"{targets}, out of {len(ranked)} planned"
        )
        changes = _changes(in_running, prices)
    else:
        winner = None
        # Nothing meets the targets: the closest layouts that work at all (the pack accepts
        # them) say what the targets cost.
        shown = [c for c in ranked if c.refused_by is None][:TOP_FEW]
        why = f"none of the {len(ranked)} layouts planned meets {targets}"
        changes = ["looser targets (--max-itl-ms, --max-ttft-ms): the rows below are the closest"]
    if show_all:
        return Shortlist(winner, list(ranked), why, changes)
    return Shortlist(winner, shown, why, changes, _not_shown(ranked, shown))


def _top_with_every_gpu(in_running: list[Candidate], top: int) -> list[Candidate]:
    """The first `top` rows plus every other GPU's cheapest, at most MAX_SHOWN in all: the
    runners-up give way to the other GPUs, since a near-tie says less than a GPU not seen."""
    shown = _with_every_gpu(in_running[:top], in_running)
    while len(shown) > MAX_SHOWN and top > 1:
        top -= 1
        shown = _with_every_gpu(in_running[:top], in_running)
    return shown


def _with_every_gpu(shown: list[Candidate], in_running: list[Candidate]) -> list[Candidate]:
    """The rows to show plus, for every GPU none of them runs on, its cheapest layout: a team
    that cannot obtain the winner's GPU sees what each other GPU costs."""
    gpus = {c.accelerator for c in shown}
    extra = []
    for candidate in in_running:
        if candidate.accelerator not in gpus:
            gpus.add(candidate.accelerator)
            extra.append(candidate)
    return sorted(shown + extra, key=lambda c: c.rank)


def _price(machine_type: str, prices: Mapping[str, float] | None) -> float:
    return catalog.MACHINE_TYPES[machine_type].list_price(prices)


def _cost(candidate: Candidate) -> float:
    cost = candidate.usd_per_million_output_tokens
    return cost if cost is not None else float("inf")


def _changes(in_running: list[Candidate], prices: Mapping[str, float] | None) -> list[str]:
    winner = in_running[0]
    changes = []
    ties = [c for c in in_running if c.tie]
    if ties:
        changes.append(
            f"{len(ties)} other layout(s) cost within the planner's measured throughput error of "
            "the winner (marked =): the estimates cannot tell them apart, so latency or what you "
            "can obtain decides"
        )
    faster = next((c for c in in_running if c.ttft_s < winner.ttft_s), None)
    if faster is not None:
        changes.append(
            f"a TTFT target below {winner.ttft_s * 1e3:,.0f} ms (--max-ttft-ms): then "
            f"{_name(faster)} wins at {_cost(faster) / _cost(winner):.2f}x the cost, TTFT "
            f"{faster.ttft_s * 1e3:,.0f} ms"
        )
    # Cost per token is the node price over the tokens a node-hour serves: linear in the price,
    # so the price at which another machine type overtakes is exact, not estimated.
    rival = next((c for c in in_running if c.machine_type != winner.machine_type), None)
    if rival is not None:
        ratio = _cost(winner) / _cost(rival)
        own = _price(winner.machine_type, prices)
        theirs = _price(rival.machine_type, prices)
        changes.append(
            f"prices (servestack:prices): {rival.machine_type} at ${theirs * ratio:,.2f}/node-hour "
            f"or less (now ${theirs:,.2f}), or {winner.machine_type} above "
            f"${own / ratio:,.2f} (now ${own:,.2f}), makes {_name(rival)} the cheapest"
        )
    return changes


def _name(candidate: Candidate) -> str:
    return f"{candidate.machine_type} {candidate.layout}"


def _not_shown(ranked: list[Candidate], shown: list[Candidate]) -> str:
    hidden = [c for c in ranked if c not in shown]
    if not hidden:
        return ""
    costlier = sum(1 for c in hidden if c.meets_targets)
    slow = sum(1 for c in hidden if not c.meets_targets and c.refused_by is None)
    refused = Counter(c.refused_by for c in hidden if c.refused_by is not None)
    parts = []
    if costlier:
        parts.append(f"{costlier} costlier")
    if slow:
        parts.append(f"{slow} missing the latency targets")
    if refused:
        rules = ", ".join(f"{code} {count}" for code, count in refused.most_common())
        parts.append(
            f"{sum(refused.values())} refused by the planner and the policy pack ({rules})"
        )
    return f"{len(hidden)} more not shown: {'; '.join(parts)} — --all lists them"
