"""How far the planner's estimates are from published measurements: the error it publishes, and
what that error does not cover.

Measured on the held-back rows of the calibration set (`tests/calibration_set.py`: published
vLLM runs the efficiency constants were not fitted on), by the kind of estimate: dense or MoE
model, and decode (time per output token), TTFT (time to first token) or saturation (throughput
with requests queued). The figures are generated from the calibration set into
`serving.plan.error_bands` by scripts/fit_speed_constants.py, whose `--check` (run by the tests)
fails when they drift, so they are what the planner measurably does.

A band is measured only for what its runs exercised. The speed model prices a Blackwell GPU, an
int4 checkpoint, linear or sparse attention, an FP8 KV cache or a pipeline with terms (and
fitted shares) that no held-back run may have tested; a plan that rests on such a feature names
it (`beyond_measured`), so that its band is not read as covering it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from serving.plan.error_bands import MEASURED, MEASURED_FEATURES
from serving.plan.kv_cache import layer_runs
from serving.spec.parts import Parallelism
from serving.spec.profile import ModelSpec

Phase = Literal["decode", "ttft", "saturation"]

# A feature counts as measured once this many held-back runs exercised it: the floor for
# a class of estimate (three runs, so that one page's quirk is not the whole evidence).
MIN_MEASURING_RUNS = 3
# Compute capability majors by the name of their GPUs' generation.
GENERATIONS = {8: "Ampere", 9: "Hopper", 10: "Blackwell"}
# How each kind of layer (serving.catalog.attention) is named in a plan.
ATTENTION_NAMES = {
    "full": "full attention",
    "sliding": "sliding-window attention",
    "chunked": "chunked attention",
    "linear": "linear attention",
    "mla": "latent attention (MLA)",
}
SPARSE_MLA = "sparse latent attention (an indexer's top-k)"


@dataclass(frozen=True)
class ErrorBand:
    """Relative errors (estimate / published - 1) of one kind of estimate."""

    points: int
    median: float = 0.0  # median |error|
    band: float = 0.0  # |error| that 80% of the points stay within
    worst: float = 0.0  # largest error, signed

    def describe(self) -> str:
        if not self.points:
            return "not yet measured against published runs"
        return (
            f"±{self.band:.0%} (80% of {self.points} published runs within; median "
            f"{self.median:.0%}, worst {self.worst:+.0%})"
        )


# (is_moe, phase) -> measured on the held-back rows.
ERROR_BANDS: dict[tuple[bool, str], ErrorBand] = {
    kind: ErrorBand(*figures) for kind, figures in MEASURED.items()
}


def error_band(is_moe: bool, phase: Phase) -> ErrorBand:
    return ERROR_BANDS.get((is_moe, phase), ErrorBand(points=0))


def exercised(spec: ModelSpec, layout: Parallelism) -> frozenset[str]:
    """What an estimate for `spec` on `layout` rests on, among what the speed model prices
    differently: the GPU's generation, the weights' and the experts' formats and the kinds of
    attention on it (each runs its own kernels there: FP8 weights are weight-only on Ampere,
    FlashMLA is Hopper's), attention sinks, an FP8 KV cache, a pipeline, prefill/decode
    disaggregation, LoRA adapters and prefix-cache hits."""
    arch = spec.architecture
    major = spec.gpu.compute_capability[0]
    on = GENERATIONS.get(major, f"compute capability {major}")
    found = {f"{on} GPUs", f"{spec.weights_dtype} weights on {on}"}
    if arch.is_moe:
        found.add(f"{spec.expert_weights_dtype} experts on {on}")
    kinds = {
        SPARSE_MLA if run.indexer_topk else ATTENTION_NAMES[run.kind] for run in layer_runs(spec)
    }
    found |= {f"{kind} on {on}" for kind in kinds}
    if arch.attention_sinks:
        found.add(f"attention sinks on {on}")
    for present, name in (
        (spec.kv_cache_dtype == "fp8", "an FP8 KV cache"),
        (layout.pipeline > 1, "pipeline parallelism"),
        (spec.disaggregation is not None, "prefill/decode disaggregation"),
        (spec.lora is not None, "LoRA adapters"),
        (bool(spec.workload.prefix_cache_hit_rate), "prefix-cache hits"),
    ):
        if present:
            found.add(name)
    return frozenset(found)


def beyond_measured(spec: ModelSpec, layouts: Iterable[Parallelism]) -> list[str]:
    """What the estimates for `spec` on `layouts` rest on that fewer than MIN_MEASURING_RUNS
    held-back runs exercised: their measured error does not cover it. Where a GPU generation
    itself is unmeasured, it stands for everything on it (a B200 is named once, not again for
    its weights and attention)."""
    found = frozenset().union(*(exercised(spec, layout) for layout in layouts))
    beyond = {f for f in found if MEASURED_FEATURES.get(f, 0) < MIN_MEASURING_RUNS}
    generations = [f.removesuffix(" GPUs") for f in beyond if f.endswith(" GPUs")]
    return sorted(f for f in beyond if not any(f.endswith(f" on {g}") for g in generations))
