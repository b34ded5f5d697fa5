"""Where a profile's files come from: a model's weights and its LoRA adapters are each named by a
Hugging Face repo id or a Cloud Storage path. The one home of those spellings."""

from __future__ import annotations

import re

# Weights or adapters on Cloud Storage: the source names a bucket with this scheme.
GCS_SCHEME = "gs://"
# A Hugging Face repository id: owner/name.
HF_REPO = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
