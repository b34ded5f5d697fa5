"""Imports only point down: serving knows nothing of Pulumi, infra or policies; policies know
nothing of infra (see DESIGN.md, 'The layers')."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from repo import REPO

ROOT = REPO
FORBIDDEN = {
    "serving": {"pulumi", "pulumi_gcp", "pulumi_kubernetes", "pulumi_policy", "infra", "policies"},
    "policies": {"infra"},
}


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_only_point_down(package: str) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"{package}/ has no modules"
    offenders = {
        str(path.relative_to(ROOT)): sorted(imported_roots(path) & FORBIDDEN[package])
        for path in files
        if imported_roots(path) & FORBIDDEN[package]
    }
    assert offenders == {}


def test_the_offline_cli_loads_no_pulumi_sdk() -> None:
    """`servestack plan` answers in a fraction of a second; the Pulumi SDKs take a second and
    more to import, so only the commands that run the program (preview) import them."""
    import subprocess
    import sys

    probe = (
        "import sys, infra.cli.app; "
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0].startswith('pulumi'))))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.strip()
    assert loaded == ""
