"""The planner and the policy pack give one verdict. Profiles are generated from the catalogs
with random layouts (seeded, so a failure repeats); for each, `servestack plan` refuses exactly
the layouts the pack's mandatory topology policies refuse, and every layout a verdict suggests
passes both."""

from __future__ import annotations

import random
from typing import Any

import pytest
from pack_support import pack_refusals
from pydantic import ValidationError

from serving import catalog
from serving.plan.planner import plan
from serving.spec.profile import ModelSpec

SEED = 14
CASES = 120
# The layouts a user might try, sane and not: TP sizes that do not divide heads or exceed a
# node, pipelines, data-parallel groups, expert parallelism on dense and MoE models, and every
# placement strategy.
TENSOR = (1, 2, 3, 4, 6, 8, 16)
PIPELINE = (1, 1, 1, 2, 4)
DATA = (1, 1, 2, 3, 4, 8)
PLACEMENT = ("auto", "auto", "auto", "STRICT_PACK", "PACK", "SPREAD")


def _profile(rng: random.Random) -> ModelSpec | None:
    arch = catalog.ARCHITECTURES[rng.choice(sorted(catalog.ARCHITECTURES))]
    machine = rng.choice([None, *sorted(catalog.MACHINE_TYPES)])
    accelerator = (
        catalog.MACHINE_TYPES[machine].accelerator
        if machine
        else rng.choice(sorted(catalog.ACCELERATORS))
    )
    fields: dict[str, Any] = {
        "name": "generated",
        "source": "org/model",
        "architecture": arch.key,
        "accelerator": accelerator,
        "machine_type": machine,
        "parallelism": {
            "tensor": rng.choice(TENSOR),
            "pipeline": rng.choice(PIPELINE),
            "data": rng.choice(DATA),
            "expert": rng.random() < 0.3,
        },
        "max_model_len": rng.choice([4096, 8192, 32768, 131072]),
        "placement": rng.choice(PLACEMENT),
        "workload": {"input_tokens": 1000, "output_tokens": 200},
    }
    if arch.weight_dtype == "bf16" and rng.random() < 0.3:
        fields["quantization"] = "fp8"
    try:
        return ModelSpec.model_validate(fields)
    except ValidationError:
        return None  # refused as a profile, before any layout is judged


def _profiles() -> list[ModelSpec]:
    rng = random.Random(SEED)
    found: list[ModelSpec] = []
    while len(found) < CASES:
        spec = _profile(rng)
        if spec is not None and spec.max_model_len <= spec.architecture.max_position_embeddings:
            found.append(spec)
    return found


def plan_refusals(spec: ModelSpec) -> list[str]:
    return [f"{v.code}: {v.message}" for v in plan(spec).verdicts if v.severity == "error"]


PROFILES = _profiles()


@pytest.mark.parametrize("index", range(CASES))
def test_plan_and_pack_refuse_the_same_layouts(index: int) -> None:
    spec = PROFILES[index]
    planned, judged = plan_refusals(spec), pack_refusals(spec)
    assert bool(planned) == bool(judged), (spec.parallelism, spec.placement, planned, judged)


@pytest.mark.parametrize("index", range(CASES))
def test_every_suggested_layout_passes_plan_and_pack(index: int) -> None:
    spec = PROFILES[index]
    suggestions = {v.suggestion for v in plan(spec).verdicts if v.suggestion is not None}
    for layout in suggestions:
        followed = spec.model_copy(update={"parallelism": layout, "placement": "auto"})
        assert plan_refusals(followed) == [], (spec.parallelism, layout)
        assert pack_refusals(followed) == [], (spec.parallelism, layout)


def test_the_generated_profiles_cover_both_verdicts() -> None:
    """The property means little unless both accepted and refused layouts were generated."""
    refused = sum(1 for spec in PROFILES if plan_refusals(spec))
    assert 0.2 * CASES < refused < 0.9 * CASES


def test_the_issues_layout_is_refused_by_plan_as_by_preview() -> None:
    """A bf16 70B at tensor=4 pipeline=4: plan used to suggest it, and the pack refuses it."""
    spec = ModelSpec.model_validate(
        {"name": "big", "source": "org/model", "architecture": "llama-3.3-70b",
         "accelerator": "h100-80gb", "machine_type": "a3-highgpu-8g",
         "parallelism": {"tensor": 4, "pipeline": 4}, "max_model_len": 8192}
    )  # fmt: skip
    assert any(line.startswith("needless-span") for line in plan_refusals(spec))
    assert any("needless-span" in line for line in pack_refusals(spec))
