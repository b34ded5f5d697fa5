"""How large a Kubernetes object may be before the API server refuses to store it, and the one
check of an object against those limits. infra checks every object it would register or render;
the policy pack checks what reaches it the same way."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

# etcd's default request limit (--max-request-bytes, 1.5 MiB): the API server cannot store a
# larger object ("etcdserver: request is too large").
OBJECT_BYTES_MAX = 1536 * 1024
# apimachinery's TotalAnnotationSizeLimitB: all of an object's annotations, keys and values.
ANNOTATIONS_BYTES_MAX = 256 * 1024
# A ConfigMap's or Secret's data (MaxSecretSize; ConfigMaps share it).
DATA_BYTES_MAX = 1024 * 1024


def object_bytes(manifest: Mapping[str, Any]) -> int:
    """The object as JSON, as the API server receives it and etcd stores a custom resource."""
    return len(json.dumps(manifest, separators=(",", ":"), default=str).encode())


def size_problems(manifest: Mapping[str, Any]) -> list[str]:
    """Why the API server would refuse to store this object, if it would."""
    problems = []
    size = object_bytes(manifest)
    if size > OBJECT_BYTES_MAX:
        problems.append(
            f"is {size:,} bytes; the Kubernetes API stores objects of at most "
            f"{OBJECT_BYTES_MAX:,} bytes"
        )
    annotations = (manifest.get("metadata") or {}).get("annotations") or {}
    annotated = sum(len(str(k).encode()) + len(str(v).encode()) for k, v in annotations.items())
    if annotated > ANNOTATIONS_BYTES_MAX:
        problems.append(
            f"carries {annotated:,} bytes of annotations; Kubernetes allows "
            f"{ANNOTATIONS_BYTES_MAX:,}"
        )
    if manifest.get("kind") in ("ConfigMap", "Secret"):
        data = {**(manifest.get("data") or {}), **(manifest.get("stringData") or {})}
        held = sum(len(str(k).encode()) + len(str(v).encode()) for k, v in data.items())
        if held > DATA_BYTES_MAX:
            problems.append(
                f"holds {held:,} bytes of data; a {manifest['kind']} holds at most "
                f"{DATA_BYTES_MAX:,}"
            )
    return problems
