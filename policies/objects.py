"""Kubernetes objects as the API server will store them: within its size limits, and carrying no
credential by value in a RayService's Serve config or its profile annotation. Both checks are
serving's own (`serving.spec.limits`, `serving.spec.secrets`), the ones `pulumi up` and `servestack
render`
apply before anything is registered or written."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from policies.common import resource_policy
from policies.views import UnreadableError, rayservice
from serving.compile.compiler import PROFILE_ANNOTATION
from serving.spec.limits import size_problems
from serving.spec.secrets import credential_in, find_credentials

KUBERNETES_PREFIX = "kubernetes:"


def _object_size(
    resource_type: str, name: str, props: Mapping[str, Any], config: Mapping[str, Any]
) -> Iterator[str]:
    if not resource_type.startswith(KUBERNETES_PREFIX) or resource_type.endswith(":Release"):
        return  # a Helm release is not an object; its chart's objects are the chart's
    manifest = {"kind": resource_type.rpartition(":")[2], **props}
    for problem in size_problems(manifest):
        yield f"{name} {problem}"


def _no_credential_value(
    resource_type: str, name: str, props: Mapping[str, Any], config: Mapping[str, Any]
) -> Iterator[str]:
    view = rayservice(resource_type, name, props)
    if view is None:
        return
    text = view.serve_text
    what = credential_in(text)
    found = [("serveConfigV2", what)] if what else []
    with contextlib.suppress(UnreadableError):  # an unparsable config is another policy's
        found += [(f"serveConfigV2 {p}", w) for p, w in find_credentials(view.serve_document)]
    profile = view.profile_text
    if profile:
        fields: Any
        try:
            fields = view.profile()
        except UnreadableError:
            fields = profile
        found += [
            (f"the {PROFILE_ANNOTATION} annotation {p}", w) for p, w in find_credentials(fields)
        ]
    for where, what in dict.fromkeys(found):
        yield f"{name}: {where} holds what looks like {what}, in plaintext"


OBJECT_POLICIES = [
    resource_policy(
        "platform-object-size-limits",
        "Every Kubernetes object fits what the API server stores: 1.5 MiB an object, 256 KiB of "
        "annotations, 1 MiB of ConfigMap or Secret data.",
        "Shorten what the profile carries into the object (env, engine_args, an inline "
        "architecture); `servestack render` names the file and the object.",
        _object_size,
    ),
    resource_policy(
        "serving-rayservice-no-credential-value",
        "No credential sits by value in a RayService's Serve config or its profile annotation.",
        "Remove the value from the profile's env or engine_args; the Hugging Face token is a "
        "Pulumi secret (servestack:hf_token) that reaches pods as a Kubernetes Secret.",
        _no_credential_value,
    ),
]
