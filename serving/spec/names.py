"""Every name servestack derives from a model, in one place: the profile's file name, the model's
Kubernetes objects and its GCP service account. infra names what it registers with these, and
policies read names the same way, so no two spellings of one name can drift apart.

Kubernetes and GCP names hold fewer characters than a served model id ('.' becomes '-', a GCP
account id is cut to 30), so two models can derive one name; `collisions` finds them, so a stack
is refused before the second model silently takes over the first one's objects.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

from serving.errors import FixableValueError

# A profile is `stacks/models/<name>.yaml`: a plain file name, never a path.
PROFILE_NAME = re.compile(r"^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$")
# KubeRay 1.7.0 (ValidateRayServiceMetadata): a RayService name is a DNS-1035 label of at most
# 47 characters (its RayCluster adds 6, and the cluster's `-serve-svc` Service must stay a label).
RAYSERVICE_NAME_MAX = 47
_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_NOT_DNS = re.compile(r"[^a-z0-9-]+")
# GCP service account ids: 6-30 characters, a lower-case letter first.
GCP_ACCOUNT_ID = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
GCP_ACCOUNT_ID_MAX = 30
_HASH_CHARS = 6


def check_profile_name(name: str) -> str:
    """A model named in a stack: the stem of a file in stacks/models/, nothing that leaves it."""
    if not PROFILE_NAME.fullmatch(name):
        raise FixableValueError(
            f"'{name}' is not a profile name",
            "name a file of stacks/models/ without .yaml: lower-case letters, digits, '.', '_' "
            "and '-', starting and ending with a letter or digit (no '/' or '..')",
        )
    return name


def short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:_HASH_CHARS]


def kubernetes_name(served_name: str) -> str:
    """The model's name in Kubernetes (RayService, Ingress, and the prefix of its other
    objects): its served id as a DNS-1035 label, '.' and anything else spelled '-'."""
    return _NOT_DNS.sub("-", served_name.lower()).strip("-")


def kubernetes_name_problem(served_name: str) -> FixableValueError | None:
    """Why the served id's Kubernetes form is no RayService name KubeRay accepts, if it is not."""
    name = kubernetes_name(served_name)
    if len(name) > RAYSERVICE_NAME_MAX:
        return FixableValueError(
            f"'{served_name}' becomes the RayService '{name}', {len(name)} characters; KubeRay "
            f"takes at most {RAYSERVICE_NAME_MAX}",
            f"shorten name to {RAYSERVICE_NAME_MAX} characters or fewer",
        )
    if not _DNS_1035.fullmatch(name):
        return FixableValueError(
            f"'{served_name}' becomes the RayService '{name}', which must start with a letter "
            "(a DNS-1035 label, as Kubernetes Services need)",
            f"start name with a letter, e.g. 'm-{served_name}'",
        )
    return None


def serve_service_name(served_name: str) -> str:
    """The Service KubeRay creates for the RayService's Serve endpoint."""
    return f"{kubernetes_name(served_name)}-serve-svc"


def hf_secret_name(served_name: str) -> str:
    return f"{kubernetes_name(served_name)}-hf-token"


def service_account_name(served_name: str) -> str:
    """The Kubernetes service account the model's Ray head runs as."""
    return f"{kubernetes_name(served_name)}-ray"


def worker_service_account_name(served_name: str) -> str:
    """The Kubernetes service account the model's Ray workers run as."""
    return f"{kubernetes_name(served_name)}-ray-worker"


def router_configmap_name(served_name: str) -> str:
    return f"{kubernetes_name(served_name)}-servestack-router"


def gcp_account_id(served_name: str, role: str = "weights") -> str:
    """A GCP service account id for one of the model's roles. Where the plain form
    `<name>-<role>` is no valid id (too long, or not starting with a letter), the name is cut
    and a hash of the whole served id added, so two models never share an account."""
    plain = f"{kubernetes_name(served_name)}-{role}"
    if GCP_ACCOUNT_ID.fullmatch(plain):
        return plain
    suffix = f"-{short_hash(served_name)}-{role}"
    stem = kubernetes_name(served_name)
    if not stem[:1].isalpha():
        stem = f"m-{stem}"
    stem = stem[: GCP_ACCOUNT_ID_MAX - len(suffix)].rstrip("-")
    return f"{stem}{suffix}"


def derived_names(served_name: str) -> dict[str, str]:
    """Every name one model takes, by what it names."""
    return {
        "RayService and Ingress": kubernetes_name(served_name),
        "Service": serve_service_name(served_name),
        "Secret": hf_secret_name(served_name),
        "ServiceAccount": service_account_name(served_name),
        "workers' ServiceAccount": worker_service_account_name(served_name),
        "ConfigMap": router_configmap_name(served_name),
        "GCP service account": gcp_account_id(served_name),
    }


def collisions(served_names: Mapping[str, str]) -> list[tuple[str, str, str, str]]:
    """(kind, name, first, second) for each derived name two models share; `served_names` maps
    each profile to the model id it serves."""
    found = []
    taken: dict[tuple[str, str], str] = {}
    for profile, served in served_names.items():
        for kind, name in derived_names(served).items():
            other = taken.setdefault((kind, name), profile)
            if other != profile:
                found.append((kind, name, other, profile))
    return found
