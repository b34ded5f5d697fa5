"""Every policy of the pack on the resources the real program registers (under the mock engine,
as `servestack preview` records them): a passing case (the shipped stack as it is), a failing
case (one property broken), a missing property, and a config override (enforcement level or
threshold). Test ids name the policy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from policy_edits import (
    CLUSTER,
    EDGE_RELEASE,
    INGRESS,
    MODEL_NETWORK_POLICY,
    RAYSERVICE,
    Edit,
    both,
    container_context,
    drop_env,
    drop_head_image,
    drop_worker_grace,
    engine_edit,
    env_var_in_serve_config,
    head_cpu,
    head_image,
    plaintext_token,
    pod_gpus,
    pop_at,
    profile_edit,
    resources,
    serve_edit,
    set_at,
    strategy_edit,
    violations,
    worker_pod,
    worker_pods,
    worker_template,
)

from policies.pack import POLICIES
from serving import catalog
from serving.compile.routers import ROUTER_CLASSES

BUCKET_IAM_MEMBER = "gcp:storage/bucketIAMMember:BucketIAMMember"


def _ray_prefix_router(config: dict[str, Any]) -> None:
    router = config["deployment_config"]["request_router_config"]
    router["request_router_class"] = ROUTER_CLASSES["prefix_affinity"]
    router.pop("request_router_kwargs", None)


@dataclass(frozen=True)
class Case:
    """How to break one policy, how to take away what it reads, and an override to try."""

    stack: str
    target: str | None
    breaks: Edit
    missing: Edit
    override: Any
    override_breaks: Edit | None = None  # the override, applied to the passing resources
    # When the override is a threshold: the passing resources then violate.
    threshold: bool = False
    # Where the property's absence leaves nothing to judge (no container: no secret to leak).
    missing_passes: bool = False


CASES: dict[str, Case] = {
    "topology-rayservice-tp-within-node": Case(
        "prod", RAYSERVICE, pod_gpus(1), pop_at("spec", "rayClusterConfig"), "advisory"
    ),
    "topology-rayservice-tp-divides-heads": Case(
        "prod", RAYSERVICE, engine_edit(tensor_parallel_size=3), pop_at("metadata", "annotations"),
        "advisory",
    ),
    # The prod 70B's FP8 checkpoint with an MLP one 64-row strip wider: over its 2 GPUs each
    # shard is 14,368 rows, 112.25 blocks of 128.
    "topology-rayservice-fp8-blocks-whole": Case(
        "prod", RAYSERVICE,
        profile_edit(architecture=catalog.architecture("llama-3.3-70b").model_dump(mode="json")
                     | {"key": "inline", "intermediate_size": 28672 + 64}),
        pop_at("metadata", "annotations"), "advisory",
    ),
    "topology-rayservice-strict-pack": Case(
        "prod", RAYSERVICE, strategy_edit("PACK"), pop_at("spec", "serveConfigV2"), "disabled"
    ),
    "topology-rayservice-fits": Case(
        "prod", RAYSERVICE, engine_edit(gpu_memory_utilization=0.2),
        pop_at("metadata", "annotations"), {"min_sequences": 10_000}, threshold=True,
    ),
    "topology-rayservice-needless-span": Case(
        "dev", RAYSERVICE, engine_edit(tensor_parallel_size=2), pop_at("spec", "rayClusterConfig"),
        "advisory",
    ),
    "topology-rayservice-over-sharded": Case(
        "prod", RAYSERVICE, engine_edit(tensor_parallel_size=8), pop_at("metadata", "annotations"),
        "mandatory",
    ),
    "topology-rayservice-expert-parallel": Case(
        "prod", RAYSERVICE, profile_edit(parallelism={"expert": True}),
        pop_at("metadata", "annotations"), "advisory",
    ),
    "topology-nodepool-compact-for-multinode": Case(
        "dev", RAYSERVICE, engine_edit(tensor_parallel_size=2),
        both(engine_edit(tensor_parallel_size=2), pop_at("spec", "rayClusterConfig")), "advisory",
    ),
    "serving-rayservice-image-floor": Case(
        "prod", RAYSERVICE, head_image("rayproject/ray-llm:2.56.0-py311-cu128"),
        drop_head_image, {"min_version": "2.57.0"}, threshold=True,
    ),
    "serving-rayservice-fast-paths": Case(
        "prod", RAYSERVICE, drop_env("RAY_SERVE_ENABLE_HA_PROXY", "workers"),
        pop_at("spec", "rayClusterConfig"), {"variables": ["RAY_SERVE_NOT_A_FAST_PATH"]},
        threshold=True,
    ),
    "serving-rayservice-forward-body": Case(
        "prod", RAYSERVICE, drop_env("RAY_SERVE_INGRESS_REQUEST_ROUTER_FORWARD_BODY", "head"),
        pop_at("spec", "serveConfigV2"), "advisory",
    ),
    "serving-rayservice-prefix-caching": Case(
        "prod", RAYSERVICE, engine_edit(enable_prefix_caching=False),
        pop_at("spec", "serveConfigV2"),
        "disabled",
    ),
    "serving-rayservice-fp8-compute": Case(
        "prod", RAYSERVICE,
        both(serve_edit(lambda c: c.update(accelerator_type="A100-80G")),
              profile_edit(kv_cache_dtype="auto", machine_type="a2-ultragpu-8g")),
        pop_at("metadata", "annotations"), "mandatory",
    ),
    "platform-cluster-private-nodes": Case(
        "dev", CLUSTER, set_at(False, "privateClusterConfig", "enablePrivateNodes"),
        pop_at("privateClusterConfig"), "advisory",
    ),
    "platform-cluster-workload-identity": Case(
        "dev", CLUSTER, set_at({}, "workloadIdentityConfig"), pop_at("workloadIdentityConfig"),
        "advisory",
    ),
    "platform-cluster-shielded-nodes": Case(
        "dev", CLUSTER, set_at(False, "enableShieldedNodes"), pop_at("enableShieldedNodes"),
        "disabled",
    ),
    "platform-cluster-authorized-networks": Case(
        "dev", CLUSTER,
        set_at([{"cidrBlock": "0.0.0.0/0"}], "masterAuthorizedNetworksConfig", "cidrBlocks"),
        pop_at("masterAuthorizedNetworksConfig"), {"min_prefix_length": 0},
        override_breaks=set_at(
            [{"cidrBlock": "0.0.0.0/0"}], "masterAuthorizedNetworksConfig", "cidrBlocks"
        ),
    ),
    "platform-cluster-secrets-encryption": Case(
        "dev", CLUSTER, set_at({"state": "DECRYPTED"}, "databaseEncryption"),
        pop_at("databaseEncryption"), "advisory",
    ),
    "platform-cluster-binary-authorization": Case(
        "prod", CLUSTER, set_at({"evaluationMode": "DISABLED"}, "binaryAuthorization"),
        pop_at("binaryAuthorization"), "disabled",
    ),
    "platform-nodepool-gpu-taint": Case(
        "dev", "gpu-pool", set_at([], "nodeConfig", "taints"), pop_at("nodeConfig", "taints"),
        "advisory",
    ),
    "platform-pod-no-plaintext-secret": Case(
        "prod", RAYSERVICE, plaintext_token, pop_at("spec", "rayClusterConfig"), "advisory",
        missing_passes=True,
    ),
    "platform-ingress-tls-and-auth": Case(
        "prod", INGRESS, pop_at("metadata", "annotations", "haproxy.org/backend-config-snippet"),
        pop_at("metadata", "annotations"), "advisory",
    ),
    "platform-object-size-limits": Case(
        "prod", RAYSERVICE, profile_edit(env={"PADDING": "x" * 300_000}), pop_at("metadata"),
        "advisory", missing_passes=True,
    ),
    "serving-rayservice-no-credential-value": Case(
        "prod", RAYSERVICE, env_var_in_serve_config, pop_at("spec", "serveConfigV2"), "advisory",
    ),
    "platform-edge-api-key-gate": Case(
        "dev", EDGE_RELEASE,
        set_at(["--configmap-patterns=edge/edge-api-keys"], "values", "controller", "extraArgs"),
        pop_at("values", "controller", "extraArgs"), "advisory",
    ),
    "platform-edge-stats-private": Case(
        "dev", EDGE_RELEASE, set_at(True, "values", "controller", "service", "enablePorts", "stat"),
        pop_at("values", "controller", "service", "enablePorts"), "disabled",
    ),
    "platform-edge-source-ranges": Case(
        "dev", EDGE_RELEASE, pop_at("values", "controller", "service", "annotations"),
        pop_at("values", "controller", "service"), "advisory",
    ),
    "platform-rayservice-token-auth": Case(
        "prod", RAYSERVICE, set_at({"mode": "disabled"}, "spec", "rayClusterConfig", "authOptions"),
        pop_at("spec", "rayClusterConfig"), "advisory",
    ),
    "platform-rayservice-pod-security": Case(
        "prod", RAYSERVICE, container_context(allowPrivilegeEscalation=True),
        pop_at("spec", "rayClusterConfig"), "disabled",
    ),
    "platform-rayservice-worker-identity": Case(
        "prod", RAYSERVICE, worker_pod(automountServiceAccountToken=True),
        pop_at("spec", "rayClusterConfig"), "advisory",
    ),
    "stack-rayservice-network-policies": Case(
        "dev", MODEL_NETWORK_POLICY,
        set_at({"matchLabels": {"nothing": "selected"}}, "spec", "podSelector"),
        pop_at("spec", "podSelector"), "advisory",
    ),
    "stack-rayservice-pool-exists": Case(
        "prod", "gpu-pool", set_at(1, "autoscaling", "totalMaxNodeCount"),
        pop_at("nodeConfig", "labels"), "advisory",
    ),
    "stack-pod-fits-node": Case(
        "dev", RAYSERVICE, head_cpu("8"),
        pop_at("spec", "rayClusterConfig", "headGroupSpec", "template", "spec", "nodeSelector"),
        "advisory",
    ),
    "stack-rayservice-gcs-fault-tolerance": Case(
        "dev", RAYSERVICE, pop_at("spec", "rayClusterConfig", "gcsFaultToleranceOptions"),
        pop_at("spec", "rayClusterConfig", "gcsFaultToleranceOptions", "redisPassword"),
        "advisory",
    ),
    "stack-rayservice-disruption-budgets": Case(
        "prod", RAYSERVICE, worker_template(metadata={"labels": {"app": "another"}}),
        worker_template(metadata={}), "advisory",
    ),
    "stack-rayservice-grace-fits-notice": Case(
        "dev", RAYSERVICE, worker_pods(terminationGracePeriodSeconds=120), drop_worker_grace,
        "advisory",
    ),
    "stack-rayservice-cluster-deletion-delay": Case(
        "prod", RAYSERVICE, set_at(60, "spec", "rayClusterDeletionDelaySeconds"),
        pop_at("spec", "rayClusterDeletionDelaySeconds"), {"min_seconds": 100_000},
        threshold=True,
    ),
    "stack-nodepool-upgrade-room": Case(
        "prod", "gpu-pool", set_at(4, "autoscaling", "totalMaxNodeCount"),
        pop_at("nodeConfig", "labels"), "advisory",
    ),
    # The lora stack's model, its two adapters routed by Ray's prefix router, which cannot see
    # them behind direct streaming.
    "serving-rayservice-lora-routing": Case(
        "lora", RAYSERVICE, serve_edit(_ray_prefix_router), pop_at("spec", "serveConfigV2"),
        "advisory",
    ),
    "serving-rayservice-lora-rank": Case(
        "lora", RAYSERVICE, engine_edit(max_lora_rank=8), pop_at("metadata", "annotations"),
        "advisory",
    ),
    "stack-bucket-lora-readers": Case(
        "lora", BUCKET_IAM_MEMBER, set_at("group:everyone@example.com", "member"),
        pop_at("member"), "advisory",
    ),
    # One of dev's chain steps (whichever the engine registered first) made both Spot and
    # flex-start: GKE refuses a flex-start pool that is also Spot.
    "stack-nodepool-consumption": Case(
        "dev", "gpu-pool",
        both(set_at(True, "nodeConfig", "flexStart"), set_at(True, "nodeConfig", "spot")),
        pop_at("nodeConfig", "flexStart"), "advisory", missing_passes=True,
    ),
}  # fmt: skip


def test_every_policy_of_the_pack_has_its_cases() -> None:
    assert set(CASES) == {policy.name for policy in POLICIES}


@pytest.mark.parametrize("policy", sorted(CASES))
def test_passes_on_the_shipped_stack(policy: str) -> None:
    case = CASES[policy]
    assert violations(policy, resources(case.stack)) == []


@pytest.mark.parametrize("policy", sorted(CASES))
def test_fails_when_broken(policy: str) -> None:
    case = CASES[policy]
    found = violations(policy, resources(case.stack, case.target, case.breaks))
    assert found, f"{policy} let the broken resource through"
    # A verdict on the broken property, not a resource the policy could no longer read.
    unjudged = [v.message for v in found if "cannot be judged" in v.message]
    assert unjudged == [], unjudged
    (chosen,) = [p for p in POLICIES if p.name == policy]
    assert {v.enforcement for v in found} == {chosen.enforcement_level.value}  # type: ignore[union-attr]
    assert all(v.remediation == chosen.remediation_steps for v in found)


@pytest.mark.parametrize("policy", sorted(CASES))
def test_a_missing_property_is_not_waved_through(policy: str) -> None:
    """Without what it reads, a policy reports rather than passes (or, for a property whose
    absence is itself the fault, reports that)."""
    case = CASES[policy]
    found = violations(policy, resources(case.stack, case.target, case.missing))
    if case.missing_passes:
        assert found == []
    else:
        assert found, f"{policy} passed a resource it could not read"


@pytest.mark.parametrize("policy", sorted(CASES))
def test_config_override(policy: str) -> None:
    case = CASES[policy]
    if case.threshold:
        # A stricter threshold turns the passing stack into a violation.
        assert violations(policy, resources(case.stack), case.override)
        return
    if case.override_breaks is not None:
        # A looser threshold lets the broken resource through.
        broken = resources(case.stack, case.target, case.override_breaks)
        assert violations(policy, broken)
        assert violations(policy, broken, case.override) == []
        return
    broken = resources(case.stack, case.target, case.breaks)
    found = violations(policy, broken, case.override)
    if case.override == "disabled":
        assert found == []
    else:
        assert found and {v.enforcement for v in found} == {case.override}


def test_a_release_candidate_of_the_floor_is_below_it() -> None:
    """2.56.1rc1 predates the 2.56.1 fix; reading only the digits would wave it through."""
    image = "rayproject/ray-llm:2.56.1rc1-py311-cu128"
    broken = resources("prod", RAYSERVICE, head_image(image))
    assert violations("serving-rayservice-image-floor", broken)
