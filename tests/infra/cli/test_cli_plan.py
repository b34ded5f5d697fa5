"""`servestack plan`: it prints (and, with --json, carries) the planner's own figures, and a model
that cannot fit ends it with exit code 1 and the verdict."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cli_support import does_not_fit, edit_yaml, run

from infra.platform.config import load_stack
from serving.catalog import MACHINE_TYPES
from serving.plan.accuracy import error_band
from serving.plan.planner import plan

# --- plans ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dev_text(pristine: Path) -> subprocess.CompletedProcess[str]:
    return run(pristine, "plan")


@pytest.fixture(scope="module")
def prod_text(pristine: Path) -> subprocess.CompletedProcess[str]:
    return run(pristine, "plan", "prod")


def test_plan_states_the_planners_measured_error_for_each_kind_of_model(
    dev_text: subprocess.CompletedProcess[str], pristine: Path
) -> None:
    out = " ".join(dev_text.stdout.split())
    kinds = {spec.architecture.is_moe for spec in load_stack("dev", pristine).profiles.values()}
    for is_moe in kinds:
        kind = "MoE" if is_moe else "dense"
        assert f"measured error of the estimates for {kind} models" in out
        for phase, shown in (("decode", "ITL"), ("ttft", "TTFT"), ("saturation", "throughput")):
            assert f"{shown}: {error_band(is_moe, phase).describe()}" in out


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_plan_exits_0_and_prints_each_models_memory_kv_latency_and_cost(
    request: pytest.FixtureRequest, pristine: Path, stack: str
) -> None:
    result: subprocess.CompletedProcess[str] = request.getfixturevalue(f"{stack}_text")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    out = result.stdout
    profiles = load_stack(stack, pristine).profiles
    assert profiles
    for spec in profiles.values():
        model_plan = plan(spec)
        group = model_plan.groups[0]
        memory, estimates, cost = group.memory, group.estimates, group.cost
        assert f"{spec.name}  {spec.architecture.key}" in out
        for label, value in [
            ("weights / GPU", f"{memory.weights_bytes / 1024**3:,.1f} GiB"),
            ("KV cache / GPU", f"{memory.kv_cache_bytes / 1024**3:,.1f} GiB"),
            ("KV / token", f"{memory.kv_cache_bytes_per_token:,} B"),
            ("KV capacity", f"{memory.kv_capacity_tokens:,} tokens"),
            ("TTFT", f"{estimates.ttft_s * 1e3:,.1f} ms"),
            ("ITL (batch 1)", f"{estimates.itl_s * 1e3:,.1f} ms"),
            ("$ / hour / replica", f"${cost.price_per_hour_usd:,.2f}"),
            ("$ / M output tokens", f"${cost.usd_per_million_output_tokens:,.2f}"),
        ]:
            assert re.search(rf"{re.escape(label)}\s+{re.escape(value)}", out), (label, value)


def test_plan_shows_what_the_lora_adapters_cost_a_replica(pristine: Path) -> None:
    """The lora stack's model: its GPU slots (also what the KV cache lost), the CPU memory of the
    adapters a worker holds, how many it holds, and the LoRA kernels' decode cost."""
    result = run(pristine, "plan", "lora")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    (spec,) = load_stack("lora", pristine).profiles.values()
    group = plan(spec).groups[0]
    assert group.lora is not None and group.memory.lora_bytes > 0
    for label, value in [
        ("LoRA slots / GPU", f"{group.memory.lora_bytes / 1024**3:,.1f} GiB"),
        ("LoRA / worker (CPU)", f"{group.lora.cpu_bytes_per_worker / 1024**3:,.1f} GiB"),
        ("adapters", f"{group.lora.adapters} served, {group.lora.adapters_on_gpu} per step"),
        ("LoRA decode cost", f"+{group.lora.decode_step_overhead_s * 1e3:,.1f} ms / step"),
    ]:
        assert re.search(rf"{re.escape(label)}\s+{re.escape(value)}", out), (label, value)
    document = json.loads(run(pristine, "plan", "lora", "--json").stdout)
    (model,) = document["plans"]
    shown = model["groups"][0]
    assert shown["memory"]["lora_bytes"] == group.memory.lora_bytes
    assert shown["lora"]["gpu_bytes_per_gpu"] == group.memory.lora_bytes


def test_plan_marks_each_fitting_model_as_fitting(
    dev_text: subprocess.CompletedProcess[str],
) -> None:
    assert "· fits" in dev_text.stdout
    assert "cannot work" not in dev_text.stdout


@pytest.fixture(scope="module")
def dev_json(pristine: Path) -> dict[str, Any]:
    result = run(pristine, "plan", "--json")
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def test_plan_json_names_the_default_stack_and_plans_each_of_its_models(
    dev_json: dict[str, Any], pristine: Path
) -> None:
    assert dev_json["stack"] == "dev"
    assert [p["model"] for p in dev_json["plans"]] == [
        spec.name for spec in load_stack("dev", pristine).profiles.values()
    ]


def test_plan_json_carries_the_planners_figures(dev_json: dict[str, Any], pristine: Path) -> None:
    specs = list(load_stack("dev", pristine).profiles.values())
    for spec, printed in zip(specs, dev_json["plans"], strict=True):
        expected = plan(spec)
        memory = expected.groups[0].memory
        group = printed["groups"][0]
        assert group["memory"]["kv_cache_bytes_per_token"] == memory.kv_cache_bytes_per_token
        assert group["memory"]["weights_bytes"] == memory.weights_bytes
        assert group["memory"]["kv_capacity_tokens"] == memory.kv_capacity_tokens
        assert printed["usd_per_million_output_tokens"] == expected.usd_per_million_output_tokens
        assert printed["ttft_s"] == expected.ttft_s
        assert printed["itl_s"] == expected.itl_s
        assert printed == expected.model_dump(mode="json")


def test_plan_json_reports_each_architectures_parameters_and_source(
    dev_json: dict[str, Any], pristine: Path
) -> None:
    """dev serves catalog models: their counts are the catalog's published figures and the
    source names the entry (an imported architecture's: tests/infra/cli/test_init_config.py)."""
    specs = list(load_stack("dev", pristine).profiles.values())
    for spec, printed in zip(specs, dev_json["plans"], strict=True):
        arch = spec.architecture
        assert (printed["total_params"], printed["active_params"]) == (
            arch.total_params, arch.active_params,
        )  # fmt: skip
        assert printed["architecture_source"] == f"servestack catalog '{arch.key}' ({arch.hf_repo})"
    llama = next(p for p in dev_json["plans"] if p["architecture"] == "llama-3.1-8b")
    assert llama["total_params"] == 8.03e9


def test_plan_json_applies_the_stacks_price_overrides(repo: Path) -> None:
    list_price = MACHINE_TYPES["a3-highgpu-8g"].price_per_hour_usd
    prices = {"a3-highgpu-8g": list_price / 2}
    edit_yaml(
        repo / "stacks/Pulumi.prod.yaml",
        lambda d: d["config"].update({"servestack:prices": prices}),
    )
    result = run(repo, "plan", "prod", "--json")
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)["plans"]
    specs = list(load_stack("prod", repo).profiles.values())
    for spec, model_plan in zip(specs, printed, strict=True):
        assert model_plan == plan(spec, prices).model_dump(mode="json")
        assert model_plan["groups"][0]["placement"]["machine_type"] == "a3-highgpu-8g"
        at_list_price = plan(spec).usd_per_million_output_tokens
        assert at_list_price is not None
        assert model_plan["usd_per_million_output_tokens"] == pytest.approx(at_list_price / 2)


# --- a model that cannot fit -----------------------------------------------------------------
def test_a_model_that_cannot_fit_makes_plan_exit_1_and_print_the_verdict(too_big: Path) -> None:
    result = run(too_big, "plan", "big")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    # The fitting model is still planned and shown alongside the one that fails.
    assert "llama-3.1-8b  llama-3.1-8b" in result.stdout
    assert "llama-3.3-70b  llama-3.3-70b" in result.stdout
    assert "cannot work" in result.stdout
    message = does_not_fit(too_big)
    assert "a100-40gb offers 36.0 GiB" in message and "use tensor=4" in message
    # Piped output is a fixed 110 columns wide, so a long verdict wraps onto a second line.
    assert " ".join(message.split()) in " ".join(result.stdout.split())


def test_a_model_that_cannot_fit_makes_plan_json_exit_1_with_the_verdict(too_big: Path) -> None:
    result = run(too_big, "plan", "big", "--model", "llama-3.3-70b", "--json")
    assert result.returncode == 1, result.stderr
    (printed,) = json.loads(result.stdout)["plans"]
    verdict = next(v for v in printed["verdicts"] if v["code"] == "does-not-fit")
    assert verdict["severity"] == "error"
    assert verdict["message"] == does_not_fit(too_big)
    assert verdict["suggestion"]["tensor"] == 4
    assert printed["groups"][0]["memory"]["fits"] is False


def test_a_model_that_cannot_fit_prints_the_verdicts_code(too_big: Path) -> None:
    result = run(too_big, "plan", "big")
    assert result.returncode == 1
    assert "[does-not-fit]" in result.stdout


def test_a_verdict_names_the_profile_field_its_fix_goes_in(too_big: Path) -> None:
    result = run(too_big, "plan", "big", "--model", "llama-3.3-70b")
    assert result.returncode == 1
    (printed,) = json.loads(run(too_big, "plan", "big", "--model", "llama-3.3-70b", "--json")
                            .stdout)["plans"]  # fmt: skip
    verdict = next(v for v in printed["verdicts"] if v["code"] == "does-not-fit")
    assert verdict["field"], "the rule names the field"
    assert f"(profile field: {verdict['field']})" in " ".join(result.stdout.split())
