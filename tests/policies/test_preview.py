"""`servestack preview`, run as users run it: the real program under the mock engine, judged by
the real pack. Shipped stacks pass; each negative profile under tests/policies/negative/ is
refused by the policy it is named for. And the pack Pulumi would load is well-formed."""

from __future__ import annotations

import ast
import copy
import json
import re
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_support import copy_repo, edit_yaml, run
from pulumi_policy import EnforcementLevel, ResourceValidationPolicy, StackValidationPolicy
from repo import REPO

from infra.deploy.preview import judge, record
from policies.edge import EDGE_POLICIES
from policies.pack import PACK_NAME, POLICIES
from policies.ray_security import RAY_SECURITY_POLICIES

NEGATIVE = Path(__file__).parent / "negative" / "stacks"
# Resources the real program registers, edited where no stack can reach (a misspelt controller
# flag, a commented-out gate): each file names the policy that must refuse the result.
NEGATIVE_EDITS = Path(__file__).parent / "negative" / "edits"
# The security policies: each one refuses at least one negative fixture.
SECURITY_POLICIES = {p.name for p in EDGE_POLICIES + RAY_SECURITY_POLICIES} | {
    "platform-ingress-tls-and-auth",
    "platform-cluster-secrets-encryption",
    "platform-cluster-binary-authorization",
}

# <area>-<resource>-<rule>
NAME = r"(topology|serving|platform|stack)-[a-z0-9]+-[a-z0-9-]+"
MANDATORY = EnforcementLevel.MANDATORY

# Negative stack -> the policy that must refuse it.
REFUSED_BY = {
    "tp16-on-8-gpus": "topology-rayservice-tp-within-node",
    "llama70b-bf16-a100-40gb": "topology-rayservice-fits",
    "ep-on-dense": "topology-rayservice-expert-parallel",
    "prefix-router-ray-2-56-0": "serving-rayservice-image-floor",
    "tp8-pack": "topology-rayservice-strict-pack",
    "two-node-not-compact": "topology-nodepool-compact-for-multinode",
    "head-on-e2-standard-2": "stack-pod-fits-node",
    "reservation-without-upgrade-room": "stack-nodepool-upgrade-room",
    "compact-flex-start-on-a3-high": "stack-nodepool-consumption",
    "capacity-step-too-small": "stack-nodepool-consumption",
    "flex-start-outlives-exclusion": "stack-nodepool-consumption",
    "reservation-of-another-machine-type": "stack-nodepool-consumption",
    "reservation-in-another-zone": "stack-nodepool-consumption",
    "lora-ray-prefix-router": "serving-rayservice-lora-routing",
    "lora-shared-bucket": "stack-bucket-lora-readers",
}


@pytest.fixture(scope="module")
def negative_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's Pulumi.yaml with the negative stacks and profiles in place of ours."""
    root = tmp_path_factory.mktemp("negative")
    shutil.copy(REPO / "Pulumi.yaml", root / "Pulumi.yaml")
    shutil.copytree(NEGATIVE, root / "stacks")
    return root.resolve()


def preview_json(root: Path, *args: str) -> tuple[int, dict[str, Any]]:
    result = run(root, "preview", *args, "--json")
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, json.loads(result.stdout)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_a_shipped_stack_previews_without_a_mandatory_violation(tmp_path: Path, stack: str) -> None:
    code, document = preview_json(copy_repo(tmp_path / "repo"), stack)
    assert code == 0, document["violations"]
    assert [v for v in document["violations"] if v["enforcement"] == "mandatory"] == []
    types = {r["type"] for r in document["resources"]}
    assert {
        "gcp:container/cluster:Cluster",
        "gcp:container/nodePool:NodePool",
        "kubernetes:ray.io/v1:RayService",
        "kubernetes:networking.k8s.io/v1:Ingress",
        "kubernetes:helm.sh/v3:Release",
    } <= types


def test_the_negative_profiles_cover_every_case() -> None:
    assert {p.name[len("Pulumi.") : -len(".yaml")] for p in NEGATIVE.glob("Pulumi.*.yaml")} == set(
        REFUSED_BY
    )


@pytest.mark.parametrize(("stack", "policy"), sorted(REFUSED_BY.items()))
def test_a_negative_profile_is_refused_by_its_policy(
    negative_repo: Path, stack: str, policy: str
) -> None:
    code, document = preview_json(negative_repo, stack)
    assert code == 1
    refused = {v["policy"] for v in document["violations"] if v["enforcement"] == "mandatory"}
    assert policy in refused, document["violations"]


def _edited(fixture: Path) -> tuple[str, list[Any]]:
    document = yaml.safe_load(fixture.read_text())
    resources = []
    for resource in record(document["stack"]):
        if resource.name == document["resource"]:
            inputs = copy.deepcopy(resource.inputs)
            for change in document["set"]:
                *parents, last = change["path"]
                node = inputs
                for key in parents:
                    node = node[key]
                node[last] = change["value"]
            resource = replace(resource, inputs=inputs)
        resources.append(resource)
    assert any(r.name == document["resource"] for r in resources), fixture.name
    return document["refused_by"], resources


@pytest.mark.parametrize("fixture", sorted(NEGATIVE_EDITS.glob("*.yaml")), ids=lambda p: p.stem)
def test_a_negative_edit_is_refused_by_its_policy(fixture: Path) -> None:
    policy, resources = _edited(fixture)
    refused = {v.policy for v in judge(resources) if v.enforcement == MANDATORY.value}
    assert policy in refused


def test_every_security_policy_refuses_a_negative_fixture() -> None:
    covered = {yaml.safe_load(f.read_text())["refused_by"] for f in NEGATIVE_EDITS.glob("*.yaml")}
    assert covered | set(REFUSED_BY.values()) >= SECURITY_POLICIES
    assert {p.name for p in POLICIES if p.name in SECURITY_POLICIES} == SECURITY_POLICIES
    assert all(p.enforcement_level == MANDATORY for p in POLICIES if p.name in SECURITY_POLICIES)


def test_preview_prints_components_violations_and_their_fixes(negative_repo: Path) -> None:
    result = run(negative_repo, "preview", "tp16-on-8-gpus")
    assert result.returncode == 1
    out = " ".join(result.stdout.split())
    assert "servestack:serving:LlmService servestack-serving-tp16-on-8-gpus" in out
    assert "mandatory [topology-rayservice-tp-within-node]" in out
    # The pack's verdict is the planner's, with the planner's fix.
    assert "tensor=16 needs 16 GPUs on one node; a3-highgpu-8g has 8 — use tensor=2" in out
    assert "fix: Use the layout the message names" in out


def test_a_policy_config_file_overrides_enforcement(negative_repo: Path, tmp_path: Path) -> None:
    config = tmp_path / "policy-config.json"
    config.write_text(json.dumps({"topology-rayservice-strict-pack": "advisory"}))
    code, document = preview_json(negative_repo, "tp8-pack", "--policy-config", str(config))
    assert code == 0
    (found,) = [v for v in document["violations"] if v["policy"].endswith("strict-pack")]
    assert found["enforcement"] == "advisory"


def test_a_policy_config_naming_an_unknown_policy_is_bad_input(tmp_path: Path) -> None:
    repo = copy_repo(tmp_path / "repo")
    (repo / "pc.json").write_text(json.dumps({"topology-rayservice-strict-pak": "advisory"}))
    result = run(repo, "preview", "--policy-config", "pc.json")
    assert result.returncode == 2
    assert "pc.json: topology-rayservice-strict-pak: is not a policy of this pack" in result.stderr
    assert "did you mean 'topology-rayservice-strict-pack'?" in result.stderr


class TestThePack:
    """What `pulumi preview --policy-pack policies` loads, checked without starting its server."""

    def test_pulumipolicy_yaml_runs_the_pack_in_the_projects_virtualenv(self) -> None:
        manifest = yaml.safe_load((REPO / "policies/PulumiPolicy.yaml").read_text())
        assert manifest["runtime"]["name"] == "python"
        virtualenv = manifest["runtime"]["options"]["virtualenv"]
        project = yaml.safe_load((REPO / "Pulumi.yaml").read_text())
        # The same virtualenv `pip install -e .` fills for the program, seen from policies/.
        assert (REPO / "policies" / virtualenv).resolve() == (
            REPO / project["runtime"]["options"]["virtualenv"]
        ).resolve()
        assert manifest["description"]

    def test_main_only_assembles_the_pack(self) -> None:
        tree = ast.parse((REPO / "policies/__main__.py").read_text())
        statements = [n for n in tree.body if not isinstance(n, ast.Import | ast.ImportFrom)]
        _docstring, call = statements
        assert isinstance(call, ast.Expr) and isinstance(call.value, ast.Call)
        assert getattr(call.value.func, "id", None) == "PolicyPack"
        assert PACK_NAME.startswith("servestack")

    def test_policy_names_descriptions_and_remediations(self) -> None:
        names = [p.name for p in POLICIES]
        assert len(names) == len(set(names))
        for policy in POLICIES:
            assert re.fullmatch(
                r"(topology|serving|platform|stack)-[a-z0-9]+-[a-z0-9-]+", policy.name
            )
            assert policy.description.endswith(".") and policy.description.count(". ") == 0
            assert policy.remediation_steps and policy.severity is not None
            assert policy.enforcement_level in (
                EnforcementLevel.MANDATORY,
                EnforcementLevel.ADVISORY,
            )
            assert isinstance(policy, ResourceValidationPolicy | StackValidationPolicy)

    def test_advisory_only_for_matters_of_taste(self) -> None:
        advisory = {p.name for p in POLICIES if p.enforcement_level == EnforcementLevel.ADVISORY}
        assert advisory == {"topology-rayservice-over-sharded", "serving-rayservice-fp8-compute"}


@pytest.mark.parametrize(
    ("networks", "allow_public"),
    [
        (["203.0.113.0/24"], False),
        (["10.0.0.0/8"], False),
        (["0.0.0.0/0"], True),
        (["16.0.0.0/4", "203.0.113.7/32"], True),
    ],
)
def test_authorized_networks_the_program_accepts_the_pack_accepts(
    tmp_path: Path, networks: list[str], allow_public: bool
) -> None:
    """One rule for both: a stack that opens its control plane on purpose passes the pack."""
    root = copy_repo(tmp_path / "repo")
    edit_yaml(
        root / "stacks/Pulumi.dev.yaml",
        lambda document: document["config"].update(
            {
                "servestack:master_authorized_networks": networks,
                "servestack:allow_public_control_plane": allow_public,
            }
        ),
    )
    found = judge(record("dev", root))
    assert [v for v in found if v.policy == "platform-cluster-authorized-networks"] == []


def test_a_block_the_pack_would_refuse_stops_the_program(tmp_path: Path) -> None:
    """A /4 is refused before anything is registered, as the pack would refuse it after."""
    root = copy_repo(tmp_path / "repo")
    edit_yaml(
        root / "stacks/Pulumi.dev.yaml",
        lambda document: document["config"].update(
            {"servestack:master_authorized_networks": ["16.0.0.0/4"]}
        ),
    )
    result = run(root, "preview", "dev")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "servestack:master_authorized_networks" in result.stderr
    assert "allow_public_control_plane" in result.stderr
