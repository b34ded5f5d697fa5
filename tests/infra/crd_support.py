"""The CRDs the rendered objects are checked against (KubeRay's RayService, GKE's managed
Prometheus), kept in `tests/infra/crds/` so a clone tests itself, and validation as strict as
`kubectl apply --validate=strict`: the CRD's defaults applied, unknown fields refused."""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

CRDS = Path(__file__).parent / "crds"
CRD = CRDS / "ray.io_rayservices.yaml"


def strict_schema(schema: Any) -> Any:
    """Refuse fields the schema does not name, as strict field validation does (Kubernetes
    otherwise prunes them silently, which would hide a misspelt key)."""
    if isinstance(schema, dict):
        schema = {key: strict_schema(value) for key, value in schema.items()}
        if (
            "properties" in schema
            and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            schema["additionalProperties"] = False
        if schema.get("x-kubernetes-int-or-string"):
            schema.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
        return schema
    if isinstance(schema, list):
        return [strict_schema(item) for item in schema]
    return schema


@cache
def rayservice_schema() -> dict[str, Any]:
    document = yaml.safe_load(CRD.read_text())
    (served,) = [v for v in document["spec"]["versions"] if v["name"] == "v1"]
    schema: dict[str, Any] = strict_schema(served["schema"]["openAPIV3Schema"])
    return schema


def with_defaults(value: Any, schema: dict[str, Any]) -> Any:
    """The object as the API server stores it: every absent field with a default gets it."""
    if isinstance(value, dict) and "properties" in schema:
        for key, sub in schema["properties"].items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
            if key in value:
                value[key] = with_defaults(value[key], sub)
    elif isinstance(value, list) and "items" in schema:
        return [with_defaults(item, schema["items"]) for item in value]
    return value


def validate_rayservice(manifest: dict[str, Any]) -> dict[str, Any]:
    schema = rayservice_schema()
    stored = with_defaults(copy.deepcopy(manifest), schema)
    jsonschema.Draft7Validator(schema).validate(stored)
    stored_dict: dict[str, Any] = stored
    return stored_dict
