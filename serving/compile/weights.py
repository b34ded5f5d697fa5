"""Where vLLM loads a model's weights from: its Hugging Face repo, or its Cloud Storage bucket
as GCS FUSE mounts it (read-only) in every worker pod."""

from __future__ import annotations

from serving.spec.profile import ModelSpec
from serving.spec.sources import GCS_SCHEME

# Where a gs:// bucket of weights is mounted in worker pods (GCS FUSE, read-only).
MODEL_MOUNT_ROOT = "/mnt/models"


def gcs_weights(spec: ModelSpec) -> tuple[str, str] | None:
    """(bucket, object prefix) when the weights are on GCS, else None (Hugging Face)."""
    if not spec.weights_on_gcs:
        return None
    bucket, _, prefix = spec.source.removeprefix(GCS_SCHEME).partition("/")
    return bucket, prefix.strip("/")


def mounted_path(gcs_path: str) -> str:
    """Where a gs:// object or folder is in a worker pod whose bucket GCS FUSE mounts (whole,
    under MODEL_MOUNT_ROOT/<bucket>)."""
    return f"{MODEL_MOUNT_ROOT}/{gcs_path.removeprefix(GCS_SCHEME).strip('/')}"


def model_source(spec: ModelSpec) -> str:
    """What vLLM loads: the Hugging Face repo, or the weights' path under the GCS FUSE mount."""
    if not spec.weights_on_gcs:
        return spec.source
    return mounted_path(spec.source)
