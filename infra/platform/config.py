"""Stack configuration, read in one place into frozen, typed models.

A stack file (`stacks/Pulumi.<stack>.yaml`) names its models and their environment. Keys under
the `servestack:` namespace are identical to `StackConfig`'s field names; `gcp:` keys belong to
the Google provider, of which servestack reads `gcp:project` and `gcp:region` (`GcpConfig`).
The offline CLI reads the file directly (`load_stack`); the Pulumi program reads the same keys
through `pulumi.Config` (`load_pulumi_stack`); both validate through the same models.

The models themselves, and the checks of each value on its own, are
`infra.platform.stack_config`'s; what must hold between values and the models' plans is checked
when the platform is planned (`infra/platform/plan.py`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from dataclasses import field as dataclass_field
from pathlib import Path
from typing import Any, get_origin

from infra.platform.stack_config import (
    DEFAULT_STACK,
    GCP_NAMESPACE,
    NAMESPACE,
    SECRET_KEYS,
    GcpConfig,
    StackConfig,
)
from serving.errors import ServestackError
from serving.spec import names
from serving.spec.calibration import Calibration, calibration_path, load_calibration
from serving.spec.loading import display_path, load_profile, read_yaml, validate
from serving.spec.profile import ModelSpec


@dataclass(frozen=True)
class Stack:
    name: str
    path: Path
    config: StackConfig
    gcp: GcpConfig
    profiles: dict[str, ModelSpec]
    secrets: frozenset[str] = frozenset()
    calibrations: dict[str, Calibration] = dataclass_field(default_factory=dict)

    def profile_path(self, model: str) -> Path:
        return profile_path(self.path, model)

    def calibration(self, spec: ModelSpec) -> Calibration | None:
        """The calibration record of the stack's profile serving `spec`, if it has one."""
        for profile, served in self.profiles.items():
            if served.name == spec.name:
                return self.calibrations.get(profile)
        return None


def profile_path(stack_path: Path, model: str) -> Path:
    """Where a stack file's model profile lives: `stacks/models/<model>.yaml` beside it."""
    return stack_path.parent / "models" / f"{model}.yaml"


def project_root(start: Path | None = None) -> Path:
    """The nearest directory at or above `start` holding Pulumi.yaml (else `start`)."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "Pulumi.yaml").is_file():
            return folder
    return here


def stacks_dir(root: Path | None = None) -> Path:
    return project_root(root) / "stacks"


def available_stacks(root: Path | None = None) -> list[str]:
    return sorted(
        p.name[len("Pulumi.") : -len(".yaml")] for p in stacks_dir(root).glob("Pulumi.*.yaml")
    )


def namespaced(config: dict[str, Any], source: str, namespace: str = NAMESPACE) -> dict[str, Any]:
    """The keys of one namespace of a Pulumi stack `config:` mapping, namespace stripped."""
    ours: dict[str, Any] = {}
    for key, value in config.items():
        prefix, _, name = str(key).partition(":")
        if prefix == namespace:
            ours[name] = value
        elif not name:
            raise ServestackError(
                source, f"config.{key}", "config keys need a namespace",
                f"write '{NAMESPACE}:{key}' (or 'gcp:{key}' for the Google provider)",
            )  # fmt: skip
    return ours


def load_stack(name: str = DEFAULT_STACK, root: Path | None = None) -> Stack:
    """Read a stack file and every model profile it names."""
    path = stacks_dir(root) / f"Pulumi.{name}.yaml"
    source = display_path(path)
    if not path.is_file():
        known = ", ".join(available_stacks(root)) or "none"
        raise ServestackError(
            source, "", f"no stack named '{name}'", f"use one of the stacks in stacks/: {known}"
        )
    document = read_yaml(path) or {}
    if not isinstance(document, dict) or not isinstance(document.get("config", {}), dict):
        raise ServestackError(source, "config", "expected a mapping", "see stacks/Pulumi.dev.yaml")
    config = document.get("config") or {}
    secrets = _secret_keys(config, source)
    config = {key: value for key, value in config.items() if key not in secrets}
    gcp = {
        key: value
        for key, value in namespaced(config, source, GCP_NAMESPACE).items()
        if key in GcpConfig.model_fields
    }
    stack = build_stack(name, path, namespaced(config, source), gcp)
    return replace(stack, secrets=frozenset(key.partition(":")[2] for key in secrets))


def _secret_keys(config: dict[str, Any], source: str) -> set[str]:
    """The stack file's secret keys (`{secure: ...}`, as `pulumi config set --secret` writes
    them). A secret key in plaintext is refused: it would sit in the repository as it is."""
    found = set()
    for key, value in config.items():
        namespace, _, name = str(key).partition(":")
        encrypted = isinstance(value, dict) and set(value) == {"secure"}
        if namespace == NAMESPACE and name in SECRET_KEYS:
            if not encrypted:
                raise ServestackError(
                    source, str(key), "is a secret but is written in plaintext",
                    f"remove it and run `pulumi config set --secret {key} ...`, which stores "
                    "it encrypted",
                )  # fmt: skip
            found.add(str(key))
        elif encrypted and namespace == NAMESPACE:
            raise ServestackError(
                source, str(key), "is not a secret servestack reads",
                f"secrets: {', '.join(f'{NAMESPACE}:{k}' for k in sorted(SECRET_KEYS))}",
            )  # fmt: skip
    return found


def load_pulumi_stack(root: Path | None = None) -> Stack:
    """The current Pulumi stack, its keys read through `pulumi.Config` (inside a Pulumi program).

    Pulumi hands every value over as text (numbers, booleans, lists and mappings as JSON);
    each `StackConfig` field is looked up by its name, the key the stack file and `load_stack`
    use.
    """
    import pulumi  # only the Pulumi program reads config this way; the CLI stays without it

    name = pulumi.get_stack()
    path = stacks_dir(root) / f"Pulumi.{name}.yaml"
    ours = pulumi.Config(NAMESPACE)
    values: dict[str, Any] = {}
    for field, info in StackConfig.model_fields.items():
        text = ours.get(field)
        if text is not None:
            values[field] = (
                _json(text, display_path(path), f"{NAMESPACE}:{field}")
                if _is_json(info.annotation)
                else text
            )
    gcp_config = pulumi.Config(GCP_NAMESPACE)
    gcp = {key: gcp_config.get(key) for key in GcpConfig.model_fields}
    stack = build_stack(name, path, values, {k: v for k, v in gcp.items() if v is not None})
    # Which secrets the stack holds (their values stay Pulumi secrets): the objects built from
    # the plan read the Hugging Face token exactly when the program has one to give them.
    held = frozenset(key for key in SECRET_KEYS if ours.get_secret(key) is not None)
    return replace(stack, secrets=held)


def _is_json(annotation: Any) -> bool:
    """Pulumi passes these as JSON; strings, names and CIDR blocks as they are."""
    return get_origin(annotation) in (list, dict) or annotation in (bool, int, float)


def _json(text: str, source: str, field: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise ServestackError(
            source, field, f"'{text}' is not a value of this key's type",
            "set a number, true/false, a list or a mapping as the key's description says",
        ) from None  # fmt: skip


def build_stack(
    name: str, path: Path, servestack_keys: dict[str, Any], gcp_keys: dict[str, Any]
) -> Stack:
    """Validate a stack's keys and read every model profile it names."""
    source = display_path(path)
    config = validate(StackConfig, servestack_keys, source, f"{NAMESPACE}:")
    gcp = validate(GcpConfig, gcp_keys, source, f"{GCP_NAMESPACE}:")
    profiles: dict[str, ModelSpec] = {}
    for model in config.models:
        profile = profile_path(path, model)
        if not profile.is_file():
            known = ", ".join(sorted(p.stem for p in (path.parent / "models").glob("*.yaml")))
            raise ServestackError(
                source, f"{NAMESPACE}:models", f"no profile stacks/models/{model}.yaml",
                f"add that file, or use one of: {known}",
            )  # fmt: skip
        profiles[model] = load_profile(profile)
    served: dict[str, str] = {}
    for model, spec in profiles.items():
        if spec.name in served:
            raise ServestackError(
                source, f"{NAMESPACE}:models",
                f"profiles {served[spec.name]} and {model} both serve the model '{spec.name}'",
                "give each profile its own name: each model gets its own RayService and route",
            )  # fmt: skip
        served[spec.name] = model
    for kind, derived, first, second in names.collisions(
        {model: spec.name for model, spec in profiles.items()}
    ):
        raise ServestackError(
            source, f"{NAMESPACE}:models",
            f"models '{profiles[first].name}' ({first}) and '{profiles[second].name}' ({second}) "
            f"both become the {kind} '{derived}': one would take over the other's",
            f"rename one of them (name: in stacks/models/{second}.yaml) so that they differ in "
            "letters or digits, not only in '.', '_' or case",
        )  # fmt: skip
    calibrations = {
        model: _calibration(path, model, spec)
        for model, spec in profiles.items()
        if calibration_path(path.parent, model).is_file()
    }
    return Stack(
        name=name, path=path, config=config, gcp=gcp, profiles=profiles,
        calibrations=calibrations,
    )  # fmt: skip


def _calibration(stack_path: Path, model: str, spec: ModelSpec) -> Calibration:
    """stacks/calibrations/<model>.yaml, which must be a record of the model it is named for."""
    path = calibration_path(stack_path.parent, model)
    record = load_calibration(path)
    if record.model != spec.name:
        raise ServestackError(
            display_path(path), "model",
            f"records '{record.model}', but stacks/models/{model}.yaml serves '{spec.name}'",
            f"rename the file after the profile that serves '{record.model}', or run "
            f"`servestack calibrate` again from a run of '{spec.name}'",
        )  # fmt: skip
    return record


@dataclass(frozen=True)
class ServingSecrets:
    """The stack's secrets, as Pulumi secret outputs: never plaintext in stack files, state,
    manifests or logs. Set with `pulumi config set --secret servestack:<key> ...`."""

    api_keys: Any  # pulumi.Output[list[str]]: bearer keys the edge accepts
    tls_cert: Any  # pulumi.Output[str]: PEM certificate chain the edge serves
    tls_key: Any  # pulumi.Output[str]: its PEM private key
    hf_token: Any | None  # pulumi.Output[str]: Hugging Face token, for gated models


def load_pulumi_secrets() -> ServingSecrets:
    """The secrets of the current Pulumi stack (inside a Pulumi program). A missing required
    secret stops the program with Pulumi's message naming the key."""
    import pulumi

    ours = pulumi.Config(NAMESPACE)
    return ServingSecrets(
        api_keys=ours.require_secret_object("api_keys"),
        tls_cert=ours.require_secret("tls_cert"),
        tls_key=ours.require_secret("tls_key"),
        hf_token=ours.get_secret("hf_token"),
    )
