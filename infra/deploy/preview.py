"""The offline preview: a stack's real Pulumi program under Pulumi's mock engine, judged by the
real policy pack, without a cloud account, the Pulumi CLI or a Kubernetes API server.

The program registers every resource as `pulumi preview` would (`judge_layouts=False`: the
layouts are the pack's to judge); each resource reaches the policies as the analyzer hands it
over (camelCase inputs, secrets unwrapped by pulumi_policy's own deserializer); resource
policies see each resource, stack policies all of them. Secrets are placeholders: the preview
never reads the stack's encrypted values.
"""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import settings
from pulumi.runtime.mocks import MockMonitor
from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.deserialize import deserialize_properties
from pulumi_policy.policy import PolicyCustomTimeouts

from infra.deploy.program import build
from infra.platform.config import ServingSecrets, load_stack
from infra.platform.plan import plan_platform
from policies.pack import POLICIES
from serving.errors import ServestackError, unknown_key_fix
from serving.spec.loading import read_text

PROJECT = "servestack"
PLACEHOLDER = "preview-placeholder"


@dataclass(frozen=True)
class Registered:
    urn: str
    type: str
    name: str
    parent: str
    custom: bool
    inputs: dict[str, Any]


@dataclass(frozen=True)
class Violation:
    policy: str
    enforcement: str
    severity: str
    resource: str
    message: str
    remediation: str


@dataclass
class PreviewResult:
    stack: str
    resources: list[Registered] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)

    @property
    def mandatory(self) -> list[Violation]:
        return [v for v in self.violations if v.enforcement == EnforcementLevel.MANDATORY.value]

    def components(self) -> dict[str, list[Registered]]:
        """Custom resources by the component that registered them."""
        by_urn = {r.urn: r for r in self.resources}
        grouped: dict[str, list[Registered]] = {}
        for resource in self.resources:
            if not resource.custom:
                continue
            owner = by_urn.get(resource.parent)
            label = f"{owner.type} {owner.name}" if owner else "stack"
            grouped.setdefault(label, []).append(resource)
        return grouped


def ensure_event_loop() -> None:
    """Give the thread an event loop if it has none: Pulumi's mock engine runs the program on
    the thread's current loop, and an earlier `asyncio.run` in the same process (the local
    data plane's, a test's) leaves none set."""
    try:
        asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:
        asyncio.set_event_loop(asyncio.new_event_loop())


class ProgramMocks(pulumi.runtime.Mocks):
    """Answers each resource with its inputs, plus the few outputs GCP computes that the program
    reads (an account's email, a cluster's endpoint and CA)."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        outputs = dict(args.inputs)
        outputs.setdefault("name", args.name)
        if args.typ == "gcp:serviceaccount/account:Account":
            outputs["email"] = f"{args.inputs['accountId']}@{PROJECT}.iam.gserviceaccount.com"
        if args.typ == "gcp:projects/serviceIdentity:ServiceIdentity":
            # GKE's service agent, as GCP names it for a project numbered 123456789.
            outputs["email"] = "service-123456789@container-engine-robot.iam.gserviceaccount.com"
        if args.typ == "gcp:container/cluster:Cluster":
            outputs["endpoint"] = "192.0.2.10"
            outputs["masterAuth"] = {"clusterCaCertificate": "cHJldmlldw=="}
        if args.typ == "gcp:redis/instance:Instance":
            # What Memorystore reports once it exists: a private address, TLS port, CA.
            outputs.update(
                host="10.9.0.3", port=6378, authString=PLACEHOLDER,
                serverCaCerts=[{"cert": "-----BEGIN CERTIFICATE-----preview"}],
            )  # fmt: skip
        return f"{args.name}-id", outputs

    def call(
        self, args: pulumi.runtime.MockCallArgs
    ) -> tuple[dict[Any, Any], list[tuple[str, str]] | None]:
        return {}, None


class _RecordingMonitor(MockMonitor):
    """The mock monitor, keeping what the analyzer would see: URN, parent, inputs."""

    def __init__(self, mocks: pulumi.runtime.Mocks) -> None:
        super().__init__(mocks)
        self.registered: list[Registered] = []

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
        if request.type != "pulumi:pulumi:Stack":
            inputs = pulumi.runtime.rpc.deserialize_properties(request.object)
            self.registered.append(
                Registered(
                    urn=response.urn,
                    type=request.type,
                    name=request.name,
                    parent=request.parent,
                    custom=bool(request.custom),
                    inputs=dict(inputs),
                )
            )
        return response


def _placeholder_secrets(configured: frozenset[str]) -> ServingSecrets:
    """Stand-ins for the stack's secrets; the Hugging Face token only if the stack sets one."""
    return ServingSecrets(
        api_keys=pulumi.Output.secret([PLACEHOLDER]),
        tls_cert=pulumi.Output.secret(PLACEHOLDER),
        tls_key=pulumi.Output.secret(PLACEHOLDER),
        hf_token=pulumi.Output.secret(PLACEHOLDER) if "hf_token" in configured else None,
    )


def record(stack_name: str, root: Path | None = None) -> list[Registered]:
    """Run the stack's program under the mock engine; every resource it registers."""
    stack = load_stack(stack_name, root)
    platform = plan_platform(stack, judge_layouts=False)
    monitor = _RecordingMonitor(ProgramMocks())
    ensure_event_loop()
    settings.ROOT.set(None)  # a fresh root stack per run
    pulumi.runtime.set_all_config({})
    pulumi.runtime.set_mocks(
        monitor.mocks, project=PROJECT, stack=stack_name, preview=False, monitor=monitor
    )
    try:
        program = pulumi.runtime.test(  # type: ignore[no-untyped-call]
            lambda: build(stack, platform, _placeholder_secrets(stack.secrets))
        )
        program()
    finally:
        settings.ROOT.set(None)
        # The mock engine leaves an event loop per worker thread; collected here, while the
        # interpreter is whole, they close quietly instead of complaining at exit.
        gc.collect()
    return monitor.registered


def _settings(
    policy: Policy, overrides: Mapping[str, Any]
) -> tuple[EnforcementLevel, dict[str, Any]]:
    """A policy's enforcement level and config: its schema's defaults, then the overrides, in
    the shape of `pulumi preview --policy-pack-config`."""
    config: dict[str, Any] = {}
    if policy.config_schema is not None:
        for key, schema in policy.config_schema.properties.items():
            if "default" in schema:
                config[key] = schema["default"]
    level = policy.enforcement_level or EnforcementLevel.ADVISORY
    override = overrides.get(policy.name)
    if isinstance(override, str):
        level = EnforcementLevel(override)
    elif isinstance(override, Mapping):
        level = EnforcementLevel(override.get("enforcementLevel", level.value))
        config.update({k: v for k, v in override.items() if k != "enforcementLevel"})
    return level, config


def _reporter(
    found: list[Violation], policy: Policy, level: EnforcementLevel, where: str
) -> Callable[[str, str | None], None]:
    def report(message: str, urn: str | None = None) -> None:
        found.append(
            Violation(
                policy=policy.name, enforcement=level.value,
                severity=policy.severity.value if policy.severity else "",
                resource=urn or where, message=message,
                remediation=policy.remediation_steps or "",
            )
        )  # fmt: skip

    return report


def judge(
    registered: list[Registered],
    policies: list[Policy] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> list[Violation]:
    """Run every policy over the registered resources, as the analyzer would."""
    custom = [r for r in registered if r.custom]
    options = PolicyResourceOptions(
        protect=False, ignore_changes=[], delete_before_replace=None, aliases=[],
        custom_timeouts=PolicyCustomTimeouts(0, 0, 0), additional_secret_outputs=[],
    )  # fmt: skip
    props = {r.urn: deserialize_properties(r.inputs) for r in custom}
    stack_resources = [
        PolicyResource(r.type, props[r.urn], r.urn, r.name, options, None, None, [], {})
        for r in custom
    ]
    found: list[Violation] = []
    for policy in POLICIES if policies is None else policies:
        level, config = _settings(policy, overrides or {})
        if level == EnforcementLevel.DISABLED:
            continue
        if isinstance(policy, ResourceValidationPolicy):
            for r in custom:
                args = ResourceValidationArgs(
                    r.type, props[r.urn], r.urn, r.name, options, None, config
                )
                policy.validate(args, _reporter(found, policy, level, r.urn))
        elif isinstance(policy, StackValidationPolicy):
            args_all = StackValidationArgs(stack_resources, config)
            policy.validate(args_all, _reporter(found, policy, level, "stack"))
    return found


def preview(
    stack_name: str, root: Path | None = None, overrides: Mapping[str, Any] | None = None
) -> PreviewResult:
    registered = record(stack_name, root)
    return PreviewResult(stack_name, registered, judge(registered, overrides=overrides))


def read_policy_config(path: Path) -> dict[str, Any]:
    """A `--policy-pack-config` style file: {policy: level | {enforcementLevel, <key>: ...}}."""
    source = str(path)
    try:
        document = json.loads(read_text(path))
    except ValueError as exc:
        raise ServestackError(source, "", f"is not JSON ({exc})", "write a JSON object") from None
    known = {p.name for p in POLICIES}
    if not isinstance(document, dict):
        raise ServestackError(source, "", "expected a JSON object", "map policy names to levels")
    for name in document:
        if name not in known:
            raise ServestackError(
                source,
                name,
                "is not a policy of this pack",
                unknown_key_fix(name, known, "policies"),
            )
    return dict(document)
