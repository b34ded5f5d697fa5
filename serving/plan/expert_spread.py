"""Where one token's routed experts sit: how many GPUs, and how many nodes, hold at least one of
them. DeepEP's high-throughput all-to-all sends a token once to each such node and once to each
such GPU (`serving.plan.collectives`), so these counts are its traffic.

vLLM places experts contiguously: expert-parallel rank r holds experts [r E / EP, (r + 1) E /
EP), and a node holds its GPUs' ranges side by side. A token's router picks `experts_per_token`
(k) of the E experts. With group-limited routing (DeepSeek-V3: 8 groups of 32, `topk_group` 4)
it first picks K = `expert_groups_per_token` groups, by the sum of each group's best two scores
(vLLM's grouped_topk, `noaux_tc`), then its k experts among theirs: the best experts of the
groups that won, k / K of them in each as the groups' scores are made (2 of DeepSeek-V3's 8).
Which groups win, and which experts in a group, are taken as uniform draws, the balanced case
(real routers are skewed; EPLB exists for that). A unit of experts misses the token when no
pick lands on it: in each chosen group it overlaps, the hypergeometric C(w - m, p) / C(w, p)
for its m of the group's w experts and p picks.
"""

from __future__ import annotations

import math

from serving.catalog import Architecture


def _misses(experts: float, inside: float, picks: float) -> float:
    """P(none of `picks` draws without replacement among `experts` lands on `inside` of them):
    C(experts - inside, picks) / C(experts, picks), in Gamma functions so that a unit holding
    part of an expert's share, or k / K picks that are not whole, take the same formula."""
    if experts - inside - picks + 1 <= 0:
        return 0.0
    return math.exp(
        math.lgamma(experts - inside + 1)
        - math.lgamma(experts - inside - picks + 1)
        - math.lgamma(experts + 1)
        + math.lgamma(experts - picks + 1)
    )


def unit_missed(arch: Architecture, lo: float, hi: float) -> float:
    """P(a token routes to none of the experts [lo, hi))."""
    groups, chosen = arch.expert_groups, arch.expert_groups_per_token
    width = arch.num_experts / groups
    picks = arch.experts_per_token / chosen
    # by_taken[j]: over the ways to choose j of the groups the unit overlaps, the sum of the
    # probabilities that each chosen one's picks miss the unit (elementary symmetric sums).
    by_taken = [1.0]
    for group in range(int(lo // width), min(groups, math.ceil(hi / width))):
        share = min(hi, (group + 1) * width) - max(lo, group * width)
        if share <= 0:
            continue
        miss = _misses(width, share, picks)
        by_taken = [
            (by_taken[j] if j < len(by_taken) else 0.0) + (by_taken[j - 1] * miss if j else 0.0)
            for j in range(len(by_taken) + 1)
        ]
    others = groups - (len(by_taken) - 1)
    total = math.comb(groups, chosen)
    return sum(
        ways * math.comb(others, chosen - taken) / total
        for taken, ways in enumerate(by_taken)
        if 0 <= chosen - taken <= others
    )


def gpus_touched(arch: Architecture, ranks: int) -> float:
    """Expected GPUs (expert-parallel ranks) holding at least one of a token's experts."""
    share = arch.num_experts / ranks
    return sum(1 - unit_missed(arch, r * share, (r + 1) * share) for r in range(ranks))


def nodes_touched(arch: Architecture, ranks: int, gpus_per_node: int) -> tuple[float, float]:
    """(expected nodes holding at least one of a token's experts, of those how many are not the
    sending rank's own node), over EP ranks laid out `gpus_per_node` to a node."""
    share = arch.num_experts / ranks
    touched = own = 0.0
    for first in range(0, ranks, gpus_per_node):
        last = min(ranks, first + gpus_per_node)
        hit = 1 - unit_missed(arch, first * share, last * share)
        touched += hit
        # A sender sits on this node with the node's share of the ranks.
        own += (last - first) / ranks * hit
    return touched, touched - own
