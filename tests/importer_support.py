"""The stored copies of published config.json files, for the importer's tests."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from repo import REPO

from serving.catalog.importer import JsonFile, parse_json

HF_CONFIGS = REPO / "tests" / "fixtures" / "hf_configs"
FIXTURES = sorted(path.name for path in HF_CONFIGS.iterdir() if path.is_dir())


def config_dict(fixture: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((HF_CONFIGS / fixture / "config.json").read_text())
    return copy.deepcopy(data)


def as_file(data: dict[str, Any], file: str = "config.json") -> JsonFile:
    return parse_json(json.dumps(data).encode(), file)


def fixture_file(fixture: str) -> JsonFile:
    path: Path = HF_CONFIGS / fixture / "config.json"
    return parse_json(path.read_bytes(), f"{fixture}/config.json")
