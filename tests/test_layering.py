"""Imports only point down (DESIGN.md, 'The layers'): import-linter's contracts in
pyproject.toml, checked here one by one, and the stage folders they name are all the stages
there are."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from repo import REPO

IMPORT_LINTER = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
CONTRACTS = IMPORT_LINTER["contracts"]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


@pytest.mark.parametrize("contract", CONTRACTS, ids=lambda contract: contract["id"])
def test_the_import_contract_is_kept(contract: dict[str, object]) -> None:
    result = subprocess.run(
        [str(LINT_IMPORTS), "--contract", str(contract["id"]), "--no-cache"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 kept, 0 broken" in result.stdout


def test_every_stage_folder_is_a_layer_or_ships_whole() -> None:
    """A new stage folder joins the layers (or is the router, held by its own contract): one
    left out would import anything unchecked."""
    (stages,) = [contract for contract in CONTRACTS if contract["type"] == "layers"]
    layered = {name.strip() for layer in stages["layers"] for name in layer.split("|")}
    folders = {
        f"{root}.{path.parent.name}"
        for root in ("serving", "infra")
        for path in (REPO / root).glob("*/__init__.py")
    }
    assert folders - layered == {"serving.router"}
    assert layered - folders == {"policies"}


def test_the_offline_cli_loads_no_pulumi_sdk() -> None:
    """`servestack plan` answers in a fraction of a second; the Pulumi SDKs take a second and
    more to import, so only the commands that run the program (preview) import them."""
    probe = (
        "import sys, infra.cli.app; "
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0].startswith('pulumi'))))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO
    ).stdout.strip()
    assert loaded == ""
