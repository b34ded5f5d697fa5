"""What the real program registers for each shipped stack is locked down: default-deny
NetworkPolicies in the serving namespace with each model's Ray pods reachable only on the ports
named for them, Ray token auth on every RayService, a securityContext on every Ray container,
workers on their own service account without a token, the Hugging Face token and Workload
Identity only where weights are loaded, and the edge's stats off its load balancer."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from compiled_support import model_objects_of
from infra_support import RecordingMocks, Registered, pulumi_config, run, use_stack
from pulumi_policy.deserialize import deserialize_properties
from repo import REPO

from infra.deploy.components.llm_service import LlmService, LlmServiceArgs
from infra.kube.manifests import SERVING_NAMESPACE
from infra.kube.ray_security import MODEL_LABEL
from infra.platform.config import load_stack
from policies.edge import edges
from serving.catalog.ray_ports import CLIENT, CLUSTER_PORTS, DASHBOARD, GCS, HEAD_PORTS, SERVE

STACKS = ["dev", "prod"]
RAYSERVICE = "kubernetes:ray.io/v1:RayService"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
SERVICE_ACCOUNT = "kubernetes:core/v1:ServiceAccount"


@pytest.fixture(params=STACKS)
def program(request: pytest.FixtureRequest, mocks: RecordingMocks) -> RecordingMocks:
    use_stack(mocks, request.param, pulumi_config(REPO / f"stacks/Pulumi.{request.param}.yaml"))
    run(importlib.import_module("infra.__main__").main)
    return mocks


def _inputs(resource: Registered) -> dict[str, Any]:
    inputs: dict[str, Any] = deserialize_properties(resource.inputs)
    return inputs


def _pods(rayservice: dict[str, Any]) -> list[dict[str, Any]]:
    cluster = rayservice["spec"]["rayClusterConfig"]
    groups = [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]
    return [group["template"] for group in groups]


def _allowed_ports(rule: dict[str, Any]) -> set[int]:
    ports = set()
    for port in rule.get("ports", []):
        ports |= set(range(int(port["port"]), int(port.get("endPort", port["port"])) + 1))
    return ports


class TestNetworkPolicies:
    def test_each_head_declares_the_catalogs_ports(self, program: RecordingMocks) -> None:
        """The ports the NetworkPolicies open and the pack judges are the ones the head pod
        declares: one catalog, serving.catalog.ray_ports, numbers them all."""
        services = [_inputs(r) for r in program.of_type(RAYSERVICE)]
        assert services
        for service in services:
            head = service["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]
            (container,) = [c for c in head["containers"] if c["name"] == "ray-head"]
            declared = {(p["name"], p["containerPort"]) for p in container["ports"]}
            assert declared == {(p.name, p.port) for p in HEAD_PORTS}

    def test_the_serving_namespace_denies_by_default(self, program: RecordingMocks) -> None:
        policies = [_inputs(p) for p in program.of_type(NETWORK_POLICY)]
        deny = [
            p for p in policies
            if p["spec"]["podSelector"] == {} and "ingress" not in p["spec"]
            and "egress" not in p["spec"]
        ]  # fmt: skip
        (only,) = deny
        assert only["metadata"]["namespace"] == SERVING_NAMESPACE
        assert set(only["spec"]["policyTypes"]) == {"Ingress", "Egress"}

    def test_each_model_is_reachable_only_by_its_pods_the_edge_and_the_operator(
        self, program: RecordingMocks
    ) -> None:
        policies = [_inputs(p) for p in program.of_type(NETWORK_POLICY)]
        for service in program.of_type(RAYSERVICE):
            manifest = _inputs(service)
            labels = {t["metadata"]["labels"][MODEL_LABEL] for t in _pods(manifest)}
            (model,) = labels
            (policy,) = [
                p for p in policies
                if p["spec"]["podSelector"].get("matchLabels") == {MODEL_LABEL: model}
            ]  # fmt: skip
            for rule in policy["spec"]["ingress"]:
                assert rule["from"], "a rule without `from` admits every pod"
                sources = rule["from"][0]
                if sources.get("podSelector") == {"matchLabels": {MODEL_LABEL: model}}:
                    continue  # the cluster's own pods
                # Nobody else reaches GCS or the Ray client; only the operator the dashboard.
                assert not _allowed_ports(rule) & {GCS.port, CLIENT.port}
                if DASHBOARD.port in _allowed_ports(rule):
                    namespace = sources["namespaceSelector"]["matchLabels"]
                    assert namespace == {"kubernetes.io/metadata.name": "kuberay-system"}
            edge = [
                r for r in policy["spec"]["ingress"]
                if r["from"][0].get("namespaceSelector", {}).get("matchLabels")
                == {"kubernetes.io/metadata.name": "edge"}
            ]  # fmt: skip
            assert [_allowed_ports(r) for r in edge] == [{SERVE.port}]

    def test_every_pinned_ray_port_is_a_port_the_policy_opens_among_the_clusters_pods(
        self, program: RecordingMocks
    ) -> None:
        for service in program.of_type(RAYSERVICE):
            cluster = _inputs(service)["spec"]["rayClusterConfig"]
            own = set().union(
                *(set(range(p.port, (p.end_port or p.port) + 1)) for p in CLUSTER_PORTS)
            )
            for group in [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]:
                params = group["rayStartParams"]
                for key in ("node-manager-port", "object-manager-port", "metrics-export-port",
                            "dashboard-agent-grpc-port", "runtime-env-agent-port",
                            "dashboard-agent-listen-port"):  # fmt: skip
                    assert int(params[key]) in own, key
                low, high = int(params["min-worker-port"]), int(params["max-worker-port"])
                assert set(range(low, high + 1)) <= own


class TestRayClusters:
    def test_token_auth_on_every_rayservice(self, program: RecordingMocks) -> None:
        services = program.of_type(RAYSERVICE)
        assert services
        for service in services:
            cluster = _inputs(service)["spec"]["rayClusterConfig"]
            assert cluster["authOptions"] == {"mode": "token"}
            # KubeRay refuses token auth below Ray 2.52.
            assert tuple(int(x) for x in cluster["rayVersion"].split(".")) >= (2, 52, 0)

    def test_a_security_context_on_every_ray_container(self, program: RecordingMocks) -> None:
        for service in program.of_type(RAYSERVICE):
            for template in _pods(_inputs(service)):
                pod = template["spec"]["securityContext"]
                assert pod["runAsNonRoot"] is True and pod["runAsUser"] == 1000
                assert pod["seccompProfile"] == {"type": "RuntimeDefault"}
                for container in template["spec"]["containers"]:
                    context = container["securityContext"]
                    assert context["allowPrivilegeEscalation"] is False
                    assert context["capabilities"] == {"drop": ["ALL"]}

    def test_workers_run_as_their_own_account_without_a_token(
        self, program: RecordingMocks
    ) -> None:
        accounts = {
            a["metadata"]["name"]: a for a in map(_inputs, program.of_type(SERVICE_ACCOUNT))
        }
        for service in program.of_type(RAYSERVICE):
            cluster = _inputs(service)["spec"]["rayClusterConfig"]
            head = cluster["headGroupSpec"]["template"]["spec"]
            assert head["serviceAccountName"] in accounts
            for group in cluster["workerGroupSpecs"]:
                worker = group["template"]["spec"]
                assert worker["serviceAccountName"] != head["serviceAccountName"]
                assert worker["automountServiceAccountToken"] is False
                assert accounts[worker["serviceAccountName"]]["automountServiceAccountToken"] is (
                    False
                )

    def test_the_hugging_face_token_reaches_only_the_workers(self, program: RecordingMocks) -> None:
        for service in program.of_type(RAYSERVICE):
            cluster = _inputs(service)["spec"]["rayClusterConfig"]
            (head,) = cluster["headGroupSpec"]["template"]["spec"]["containers"]
            assert "HF_TOKEN" not in {e["name"] for e in head["env"]}


def test_workload_identity_binds_the_weights_reader_to_the_workers(mocks: RecordingMocks) -> None:
    use_stack(mocks, "dev", pulumi_config(REPO / "stacks/Pulumi.dev.yaml"))

    spec = next(iter(load_stack("dev", REPO).profiles.values())).model_copy(
        update={"source": "gs://acme-weights/llama/8b"}
    )
    run(
        lambda: LlmService(
            "llm",
            LlmServiceArgs(objects=model_objects_of(spec), project="p"),
        )
    )
    (binding,) = mocks.of_type("gcp:serviceaccount/iAMMember:IAMMember")
    accounts = {a["metadata"]["name"]: a for a in map(_inputs, mocks.of_type(SERVICE_ACCOUNT))}
    workers = [
        name for name, a in accounts.items() if a.get("automountServiceAccountToken") is False
    ]
    (worker,) = workers
    assert binding.inputs["member"].endswith(f"[{SERVING_NAMESPACE}/{worker}]")
    assert "iam.gke.io/gcp-service-account" in accounts[worker]["metadata"]["annotations"]
    head = next(name for name in accounts if name != worker)
    assert not accounts[head]["metadata"].get("annotations")


def test_the_edge_keeps_its_stats_off_the_load_balancer(program: RecordingMocks) -> None:
    class View:
        def __init__(self, resource: Registered) -> None:
            self.resource_type = resource.type
            self.name = resource.name
            self.props = _inputs(resource)

    (edge,) = edges([View(r) for r in program.registered])
    assert edge.service["enablePorts"]["stat"] is False
    assert edge.service["enablePorts"]["prometheus"] is False


def test_the_cluster_encrypts_secrets_with_its_own_kms_key(program: RecordingMocks) -> None:
    cluster = _inputs(program.one("gcp:container/cluster:Cluster"))
    key = program.one("gcp:kms/cryptoKey:CryptoKey")
    assert cluster["databaseEncryption"] == {"state": "ENCRYPTED", "keyName": f"{key.name}-id"}
    grant = _inputs(program.one("gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember"))
    assert grant["cryptoKeyId"] == f"{key.name}-id"
    assert grant["role"] == "roles/cloudkms.cryptoKeyEncrypterDecrypter"
    assert grant["member"].endswith("@container-engine-robot.iam.gserviceaccount.com")
    assert cluster["binaryAuthorization"] == {"evaluationMode": "PROJECT_SINGLETON_POLICY_ENFORCE"}
