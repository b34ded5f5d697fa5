"""Credentials written by value: the one test of whether a string is a secret that must not sit
in plaintext. Profile validation refuses such values in `env` and `engine_args`, and the policy
pack checks container environments and Serve configs with the same function.

Known token formats are matched by their prefixes; a string that is long and random-looking
(high entropy) under a key-like name (`token`, `api_key`, ...) is a secret too. The shipped
stacks hold no match: model ids, paths and import strings are short or low in entropy.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|(^|_)KEY($|_)|API_?KEY")

# Published formats of credentials; each pattern is specific enough not to match model ids,
# paths or Python import strings.
CREDENTIAL_FORMATS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    ("an OpenAI-style secret key", re.compile(r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_-]{16,}")),
    ("an AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("a GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_\w{22,})")),
    ("a GitLab token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}")),
    ("a Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("a Stripe key", re.compile(r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("a PEM block (a key or certificate)", re.compile(r"-----BEGIN [A-Z0-9 ]+-----")),
    ("a GCP service account key", re.compile(r"\"private_key(?:_id)?\"\s*:")),
    (
        "a JSON web token",
        re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ),
    ("a URL with a password in it", re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s/:@]+:[^\s/@]+@")),
)
# Random keys of 16+ characters carry about 4 bits per character; words and ids far less.
_MIN_RANDOM_LENGTH = 16
_MIN_BITS_PER_CHAR = 3.5
# A Kubernetes label or taint key of words under a domain (`cloud.google.com/compute-class`, a
# toleration's `key`): long and varied in letters, but words, not a generated key.
_WORDS_UNDER_DOMAIN = re.compile(r"[a-z]+(\.[a-z]+)+/[a-z]+([-.][a-z]+)*")
# A name as models and servestack's objects are named (`qwen3-30b-a3b-import`,
# `deepseek-v3-2-exp`): short lowercase segments of letters and numbers, at least one of them a
# word. A generated key has long segments, or segments that alternate letters and digits more
# (a UUID's `f47ac10b`), or no word at all (`a1b2-c3d4-e5f6`).
_NAME_SEGMENT = re.compile(r"[a-z0-9]{1,10}")
_WORD = re.compile(r"[a-z]{3,}")
_MAX_SEGMENT_RUNS = 4


def looks_secret(name: str) -> bool:
    """Whether a variable or argument name says it holds a credential (HF_TOKEN, API_KEY)."""
    return bool(_SECRET_NAME.search(name.upper()))


def _bits_per_char(text: str) -> float:
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def looks_random(text: str) -> bool:
    """Long, space-free and high in entropy: how generated keys look and words do not."""
    return (
        len(text) >= _MIN_RANDOM_LENGTH
        and not any(c.isspace() for c in text)
        and _bits_per_char(text) >= _MIN_BITS_PER_CHAR
        and not _WORDS_UNDER_DOMAIN.fullmatch(text)
        and not _looks_like_a_name(text)
    )


def _looks_like_a_name(text: str) -> bool:
    segments = re.split(r"[-._]", text)
    if len(segments) < 2 or not all(_NAME_SEGMENT.fullmatch(s) for s in segments):
        return False
    runs = [len(re.findall(r"[a-z]+|[0-9]+", s)) for s in segments]
    return max(runs) <= _MAX_SEGMENT_RUNS and any(_WORD.search(s) for s in segments)


def credential_in(value: str, name: str = "") -> str | None:
    """What credential `value` (found under `name`) looks like, or None."""
    for what, pattern in CREDENTIAL_FORMATS:
        if pattern.search(value):
            return what
    if name and looks_secret(name) and looks_random(value):
        return f"a random-looking secret under the key-like name '{name}'"
    return None


def find_credentials(value: Any, path: str = "", name: str = "") -> Iterator[tuple[str, str]]:
    """(path, what it looks like) for every credential anywhere in nested mappings and lists."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from find_credentials(item, f"{path}.{key}" if path else str(key), str(key))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from find_credentials(item, f"{path}.{index}" if path else str(index), name)
    elif isinstance(value, str):
        what = credential_in(value, name)
        if what is not None:
            yield path, what
