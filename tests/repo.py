"""The repository's root, named once for every test and support module."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
