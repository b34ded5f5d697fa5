"""Stack configuration, read in one place into frozen, typed models.

A stack file (`stacks/Pulumi.<stack>.yaml`) names its models and their environment. Keys under
the `servestack:` namespace are identical to `StackConfig`'s field names; `gcp:` keys belong to
the Google provider. The offline CLI reads the file directly; the Pulumi program reads the same
keys through `pulumi.Config`; both validate through `StackConfig`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from serving import catalog
from serving.errors import ServestackError
from serving.loading import display_path, load_profile, read_yaml, validate
from serving.spec import ModelSpec

NAMESPACE = "servestack"
DEFAULT_STACK = "dev"


class StackConfig(BaseModel):
    """The `servestack:` keys of a stack file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    models: list[str] = Field(
        min_length=1,
        description="Model profiles to serve: file names in stacks/models/ without .yaml.",
    )
    prices: dict[str, float] = Field(
        default_factory=dict,
        description="USD per node-hour by machine type, overriding the catalog's list prices.",
    )

    @field_validator("prices")
    @classmethod
    def _known_machines(cls, prices: dict[str, float]) -> dict[str, float]:
        for name, price in prices.items():
            catalog.machine_type(name)
            if price <= 0:
                raise ValueError(f"price for {name} must be positive")
        return prices


@dataclass(frozen=True)
class Stack:
    name: str
    path: Path
    config: StackConfig
    profiles: dict[str, ModelSpec]


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


def namespaced(config: dict[str, Any], source: str) -> dict[str, Any]:
    """The `servestack:` keys of a Pulumi stack `config:` mapping, namespace stripped."""
    ours: dict[str, Any] = {}
    for key, value in config.items():
        namespace, _, name = str(key).partition(":")
        if namespace == NAMESPACE:
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
    config = validate(
        StackConfig, namespaced(document.get("config") or {}, source), source, f"{NAMESPACE}:"
    )
    profiles: dict[str, ModelSpec] = {}
    for model in config.models:
        profile_path = path.parent / "models" / f"{model}.yaml"
        if not profile_path.is_file():
            known = ", ".join(sorted(p.stem for p in (path.parent / "models").glob("*.yaml")))
            raise ServestackError(
                source, f"{NAMESPACE}:models", f"no profile stacks/models/{model}.yaml",
                f"add that file, or use one of: {known}",
            )  # fmt: skip
        profiles[model] = load_profile(profile_path)
    served: dict[str, str] = {}
    for model, spec in profiles.items():
        if spec.name in served:
            raise ServestackError(
                source, f"{NAMESPACE}:models",
                f"profiles {served[spec.name]} and {model} both serve the model '{spec.name}'",
                "give each profile its own name: each model gets its own RayService and route",
            )  # fmt: skip
        served[spec.name] = model
    return Stack(name=name, path=path, config=config, profiles=profiles)
