"""The LoRA policies on the shipped lora stack (stacks/Pulumi.lora.yaml) as the real program
registers it: it passes the whole pack, and the routing policy asks the very rule the planner
asks (serving/plan/rules/lora_routing.py), so both refuse the same RayService alike."""

from __future__ import annotations

from policy_edits import RAYSERVICE, drop_env, resources, violations

from infra.deploy.preview import judge
from policies.pack import POLICIES
from serving.catalog.fast_paths import FORWARD_BODY_VARIABLE
from serving.plan.rules.lora_routing import lora_routing_problem
from serving.spec.names import gcp_account_id


def test_the_lora_stack_passes_every_mandatory_policy() -> None:
    found = judge(resources("lora"), POLICIES)
    assert [v.message for v in found if v.enforcement == "mandatory"] == []


def test_the_adapters_body_not_forwarded_to_the_router_is_refused_with_the_rules_words() -> None:
    broken = resources("lora", RAYSERVICE, drop_env(FORWARD_BODY_VARIABLE, "workers"))
    (found,) = violations("serving-rayservice-lora-routing", broken)
    expected = lora_routing_problem(
        direct_streaming=True,
        router="serving.router.prefix_affinity:PrefixAffinityRouter",
        adapter_aware=True,
        forwards_body=False,
    )
    assert expected is not None and found.message.endswith(expected)


def test_the_stack_grants_the_adapter_bucket_to_the_models_account_only() -> None:
    members = [
        r.inputs["member"]
        for r in resources("lora")
        if r.type == "gcp:storage/bucketIAMMember:BucketIAMMember"
        and r.inputs["bucket"] == "servestack-example-models"
    ]
    account = gcp_account_id("llama-3.1-8b-lora")
    assert members == [f"serviceAccount:{account}@my-gcp-project.iam.gserviceaccount.com"]
