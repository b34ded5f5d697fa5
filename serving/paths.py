"""Where servestack's code lives and where a local run may write, named once: the checkout
holding the `serving` package, and its git-ignored build folder."""

from __future__ import annotations

from pathlib import Path

# The checkout (or installed tree) that holds `serving/`: Ray's worker processes put it on their
# path so they import the same code as the driver.
CODE_ROOT = Path(__file__).resolve().parents[1]
# Everything a local run keeps between runs (tiny models, vLLM's caches, Ray's sessions).
BUILD_DIR = CODE_ROOT / "build"
