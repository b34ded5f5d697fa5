"""The planner's rules as a registry: one rule per module under serving/plan/rules/, each listed
once in `RULES`, each verdict carrying its rule's code, severity and profile field, and the one
wording of "tensor parallelism stays inside a node" that infra's platform plan gives too."""

from __future__ import annotations

import ast
import importlib

import pytest
from planner_support import spec
from repo import REPO

from serving.plan.planner import plan
from serving.plan.rules import RULES, Rule, tensor_across_nodes
from serving.spec.profile import ModelSpec

RULES_DIR = REPO / "serving" / "plan" / "rules"
# A profile that breaks each rule (the planner's own tests check each message).
BREAKING: dict[str, ModelSpec] = {
    "tp-crosses-node": spec(
        architecture="llama-3.3-70b", machine_type="a3-highgpu-8g", parallelism={"tensor": 16}
    ),
    "tp-heads": spec(parallelism={"tensor": 3}),
    "does-not-fit": spec(architecture="llama-3.3-70b", accelerator="a100-40gb"),
    "over-sharded": spec(parallelism={"tensor": 4}),
    "needless-span": spec(
        architecture="llama-3.3-70b",
        machine_type="a3-highgpu-8g",
        parallelism={"tensor": 4, "pipeline": 4},
    ),
    "placement-strategy": spec(parallelism={"tensor": 2}, placement="PACK"),
    "ep-on-dense": spec(parallelism={"data": 2, "expert": True}),
    "ep-size-indivisible": spec(
        architecture="mixtral-8x7b",
        machine_type="a3-highgpu-8g",
        parallelism={"tensor": 1, "data": 3, "expert": True},
    ),
    "fp8-block-shard": spec(
        architecture="qwen3-235b-a22b", quantization="fp8", parallelism={"tensor": 8}
    ),
    "fp8-weight-only": spec(accelerator="a100-80gb", quantization="fp8"),
    "lora-routing": spec(
        source="gs://weights/m",
        router="power_of_two",
        lora={"adapters": [{"name": "a", "source": "gs://weights/adapters/a", "rank": 8}]},
    ),
}


def test_every_rule_module_is_in_the_registry_once_and_the_codes_are_unique() -> None:
    modules = sorted(
        path.stem
        for path in RULES_DIR.glob("*.py")
        if "RULE" in {t.id for n in ast.walk(ast.parse(path.read_text()))
                      if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    )  # fmt: skip
    registered = [importlib.import_module(f"serving.plan.rules.{name}").RULE for name in modules]
    assert len(modules) == len(RULES) >= 9
    assert set(map(id, registered)) == set(map(id, RULES))
    codes = [rule.code for rule in RULES]
    assert len(set(codes)) == len(codes)
    # one module per rule, named after its code
    assert modules == sorted(code.replace("-", "_") for code in codes)


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.code)
def test_each_verdict_carries_its_rules_code_severity_and_field(rule: Rule) -> None:
    found = [v for v in plan(BREAKING[rule.code]).verdicts if v.code == rule.code]
    assert found, f"{rule.code}: the breaking profile gives no such verdict"
    for verdict in found:
        assert (verdict.severity, verdict.field) == (rule.severity, rule.field)
        assert verdict.field.split(".")[0] in ModelSpec.model_fields


def test_verdicts_come_in_the_registrys_order() -> None:
    order = [rule.code for rule in RULES]
    for model in BREAKING.values():
        given = [v.code for v in plan(model).verdicts]
        assert given == sorted(given, key=order.index)


def test_a_layout_breaking_no_rule_gets_no_verdict() -> None:
    assert plan(spec()).verdicts == []


def test_the_tensor_within_a_node_wording_has_one_home() -> None:
    """The planner's tp-crosses-node verdict and infra's pool check say it the same way, by
    calling `tensor_across_nodes`; no other module spells it."""
    wording = tensor_across_nodes(16, "a3-highgpu-8g", 8)
    assert wording == "tensor=16 needs 16 GPUs on one node; a3-highgpu-8g has 8"
    verdict = next(v for v in plan(BREAKING["tp-crosses-node"]).verdicts
                   if v.code == "tp-crosses-node")  # fmt: skip
    assert verdict.message.startswith(wording + " — use ")
    spelled = [
        str(path.relative_to(REPO))
        for package in ("serving", "infra", "policies")
        for path in (REPO / package).rglob("*.py")
        if "GPUs on one node" in path.read_text()
    ]
    assert spelled == ["serving/plan/rules/tp_crosses_node.py"]
    from infra.platform import pools

    # The platform's pool check says it with the rule's own function.
    assert pools.tensor_across_nodes is tensor_across_nodes
