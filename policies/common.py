"""How a servestack policy is declared: a check that yields violation messages, wrapped into a
Pulumi CrossGuard policy with its metadata. A resource the check cannot read (a view raised
`UnreadableError`) is a violation naming the resource and the field: of a mandatory policy it
blocks (fail closed), of an advisory one it is a note."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from policies.views import UnreadableError

MANDATORY = EnforcementLevel.MANDATORY
ADVISORY = EnforcementLevel.ADVISORY

ResourceCheck = Callable[[str, str, Mapping[str, Any], Mapping[str, Any]], Iterable[str]]
StackCheck = Callable[[list[Any], Mapping[str, Any]], Iterable[str]]


def _metadata(
    name: str,
    description: str,
    remediation: str,
    enforcement: EnforcementLevel,
    severity: Severity,
    config: Mapping[str, dict[str, Any]] | None,
) -> dict[str, Any]:
    """What every servestack policy declares besides its check."""
    return {
        "name": name,
        "description": description,
        "enforcement_level": enforcement,
        "config_schema": PolicyConfigSchema(properties=dict(config)) if config else None,
        "severity": severity,
        "remediation_steps": remediation,
    }


def resource_policy(
    name: str,
    description: str,
    remediation: str,
    check: ResourceCheck,
    *,
    enforcement: EnforcementLevel = MANDATORY,
    severity: Severity = Severity.HIGH,
    config: Mapping[str, dict[str, Any]] | None = None,
) -> ResourceValidationPolicy:
    """`check(resource_type, name, props, config)` yields one message per violation."""

    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        try:
            for message in check(args.resource_type, args.name, args.props, args.get_config()):
                report_violation(message, None)
        except UnreadableError as exc:
            report_violation(f"{exc.resource or args.name} cannot be judged: {exc}", None)

    return ResourceValidationPolicy(
        validate=validate,
        **_metadata(name, description, remediation, enforcement, severity, config),
    )


def stack_policy(
    name: str,
    description: str,
    remediation: str,
    check: StackCheck,
    *,
    enforcement: EnforcementLevel = MANDATORY,
    severity: Severity = Severity.HIGH,
    config: Mapping[str, dict[str, Any]] | None = None,
) -> StackValidationPolicy:
    """`check(resources, config)` yields one message per violation."""

    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        try:
            for message in check(list(args.resources), args.get_config()):
                report_violation(message, None)
        except UnreadableError as exc:
            report_violation(f"{exc.resource or 'the stack'} cannot be judged: {exc}", None)

    return StackValidationPolicy(
        validate=validate,
        **_metadata(name, description, remediation, enforcement, severity, config),
    )
