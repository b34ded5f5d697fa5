"""A model's config.json (and safetensors index) from the Hugging Face Hub, for `servestack init
ORG/NAME`. The token is $HF_TOKEN; the revision read is recorded as the commit it resolved to.

huggingface_hub 0.36 signals an unreachable Hub (no network, a proxy refusing, Hub downtime, or
HF_HUB_OFFLINE=1) with `LocalEntryNotFoundError` when the file is not in the local cache either
(`file_download._raise_on_head_call_error`); a missing repo or one the token may not read with
`RepositoryNotFoundError` / `GatedRepoError`; an unknown revision with `RevisionNotFoundError`;
a file the repo lacks with `EntryNotFoundError`, of which `LocalEntryNotFoundError` is a subclass.
A proxy or TLS failure is re-raised as requests' own `ProxyError` / `SSLError`. Before giving
up, its HTTP layer retries a refused connection five times over 23 seconds, logging each retry:
one probe of the endpoint first (through the same session, so the same proxies) says in seconds
that the Hub is unreachable, and the library's log is kept to errors so that is all it says.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from serving.catalog.importer import (
    CONFIG_FILE,
    INDEX_FILE,
    MAX_INDEX_BYTES,
    ModelFiles,
    read_json,
)
from serving.errors import ServestackError

COMMAND_LINE = "command line"
TOKEN_VARIABLE = "HF_TOKEN"
PROBE_TIMEOUT_S = 10


class HubUnreachableError(ServestackError):
    """The Hub cannot be reached: one line, what happened and what to do instead."""

    def render(self) -> str:
        return f"{self.source}: {self.field}: {self.problem}; {self.fix}"


@dataclass(frozen=True)
class HubModel:
    files: ModelFiles
    repo: str
    commit: str  # the revision's commit: the cache's snapshots/<commit>/ the download landed in

    @property
    def source(self) -> str:
        return f"hf:{self.repo}@{self.commit}"


def _unreachable(repo: str, why: str) -> HubUnreachableError:
    return HubUnreachableError(
        COMMAND_LINE, "MODEL", f"the Hugging Face Hub is unreachable ({why}), so {repo}'s "
        f"{CONFIG_FILE} cannot be read", f"download it and run `servestack init {repo} --config "
        f"PATH` (PATH: the {CONFIG_FILE}, or a folder with it and {INDEX_FILE})",
    )  # fmt: skip


@contextmanager
def _quiet_hub() -> Iterator[None]:
    hub_log = logging.getLogger("huggingface_hub")
    level = hub_log.level
    hub_log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        hub_log.setLevel(level)


def _probe(repo: str) -> None:
    """One request to the Hub's endpoint, no retries; offline mode reads the cache instead."""
    import requests
    from huggingface_hub import constants, get_session

    if constants.HF_HUB_OFFLINE:
        return
    try:
        get_session().head(constants.ENDPOINT, timeout=PROBE_TIMEOUT_S, allow_redirects=False)
    except (requests.ConnectionError, requests.Timeout) as exc:
        raise _unreachable(repo, type(exc).__name__) from None


def fetch_model_files(repo: str, revision: str | None = None) -> HubModel:
    """config.json and, where the repo has one, model.safetensors.index.json."""
    with _quiet_hub():
        _probe(repo)
        return _fetch(repo, revision)


def _fetch(repo: str, revision: str | None) -> HubModel:
    import requests
    from huggingface_hub import constants, hf_hub_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    token = os.environ.get(TOKEN_VARIABLE) or None
    shown = f"hf:{repo}"

    def download(filename: str) -> Path:
        return Path(hf_hub_download(repo, filename, revision=revision, token=token))

    try:
        config_path = download(CONFIG_FILE)
    except (LocalEntryNotFoundError, requests.ConnectionError):
        why = "HF_HUB_OFFLINE is set" if constants.HF_HUB_OFFLINE else "no answer"
        raise _unreachable(repo, why) from None
    except GatedRepoError:
        raise ServestackError(
            COMMAND_LINE, "MODEL", f"{repo} is gated and the token may not read it",
            f"accept its licence on huggingface.co and set ${TOKEN_VARIABLE}, or use --config",
        ) from None  # fmt: skip
    except RepositoryNotFoundError:
        raise ServestackError(
            COMMAND_LINE, "MODEL", f"the Hub has no repo {repo} that the token may read",
            f"check the name (org/name), set ${TOKEN_VARIABLE} for a private repo, or use --config",
        ) from None  # fmt: skip
    except RevisionNotFoundError:
        raise ServestackError(
            COMMAND_LINE, "--revision", f"{repo} has no revision '{revision}'",
            "use a branch, tag or commit of the repo",
        ) from None  # fmt: skip
    except EntryNotFoundError:
        raise ServestackError(
            COMMAND_LINE, "MODEL", f"{repo} has no {CONFIG_FILE}",
            "use --config with the model's config.json, or --architecture with a catalog key",
        ) from None  # fmt: skip
    except HfHubHTTPError as exc:
        raise ServestackError(
            COMMAND_LINE, "MODEL", f"the Hub refused {repo}'s {CONFIG_FILE}: {exc}",
            f"retry, or use --config with the model's {CONFIG_FILE}",
        ) from None  # fmt: skip
    commit = config_path.parent.name
    index = None
    try:
        index_path = download(INDEX_FILE)
    except (EntryNotFoundError, requests.ConnectionError) as exc:
        if not isinstance(exc, EntryNotFoundError) or isinstance(exc, LocalEntryNotFoundError):
            raise _unreachable(repo, f"it stopped answering before {INDEX_FILE}") from None
    else:  # a single-file checkpoint has no index
        index = read_json(index_path, f"{shown}@{commit}/{INDEX_FILE}", MAX_INDEX_BYTES)
    config = read_json(config_path, f"{shown}@{commit}/{CONFIG_FILE}")
    return HubModel(ModelFiles(config, index), repo, commit)
