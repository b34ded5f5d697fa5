"""Find every generated region on every page, fill it from its maker, and check for drift.

    .venv/bin/python scripts/generate_docs.py          # rewrite every page's regions
    .venv/bin/python scripts/generate_docs.py --check  # exit 1 if any region has drifted

A region names its maker: `<!-- generated:NAME -->` ... `<!-- /generated:NAME -->`. A region
whose name has no maker, an opening without its close, and a maker no page shows are errors, so
a table can neither be dropped from the docs nor left behind by its code.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"

# A maker is given the folder of the page it fills (relative to the repository), so that a
# link it writes resolves from that page.
Maker = Callable[[Path], str]

_OPENING = re.compile(r"<!-- generated:(?P<name>[a-z0-9-]+) -->")
_REGION = re.compile(
    r"(?P<open><!-- generated:(?P<name>[a-z0-9-]+) -->\n)"
    r".*?(?P<close><!-- /generated:(?P=name) -->)",
    re.DOTALL,
)


def anywhere(make: Callable[[], str]) -> Maker:
    """A maker whose text is the same on every page."""
    return lambda here: make()


def pages() -> list[Path]:
    """Every page a region may live on: the README and each Markdown page of the docs site."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def makers() -> dict[str, Maker]:
    from scripts.docs import front, measured, measured_url, observe, planning, reference, reruns

    found: dict[str, Maker] = {}
    for module in (front, reference, observe, planning, measured, measured_url, reruns):
        clash = set(found) & set(module.REGIONS)
        assert not clash, f"regions made twice: {sorted(clash)}"
        found.update(module.REGIONS)
    return found


def render(text: str, page: Path, made: dict[tuple[str, Path], str]) -> tuple[str, set[str]]:
    """The page with each region filled, and the names of the regions it holds."""
    known = makers()
    where = page.relative_to(ROOT)
    opened = _OPENING.findall(text)
    closed = [match["name"] for match in _REGION.finditer(text)]
    if opened != closed:
        unclosed = sorted(set(opened) - set(closed)) or opened
        raise SystemExit(f"{where}: <!-- generated:{unclosed[0]} --> has no closing marker")
    for name in opened:
        if name not in known:
            raise SystemExit(f"{where}: no maker for <!-- generated:{name} -->: {sorted(known)}")

    def fill(match: re.Match[str]) -> str:
        key = (match["name"], where.parent)
        if key not in made:
            made[key] = known[match["name"]](where.parent).rstrip("\n")
        return f"{match['open']}{made[key]}\n{match['close']}"

    return _REGION.sub(fill, text), set(opened)


def main(argv: list[str]) -> int:
    # The code the regions are made from, and the calibration set's scoring under tests/.
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    if str(ROOT / "tests") not in sys.path:
        sys.path.append(str(ROOT / "tests"))
    made: dict[tuple[str, Path], str] = {}
    shown: set[str] = set()
    wanted: dict[Path, tuple[str, str]] = {}
    for page in pages():
        current = page.read_text()
        text, names = render(current, page, made)
        wanted[page] = (current, text)
        shown |= names
    unshown = sorted(set(makers()) - shown)
    if unshown:
        raise SystemExit(f"no page shows the generated region(s) {', '.join(unshown)}")
    drifted = [page for page, (current, text) in wanted.items() if current != text]
    if "--check" in argv:
        for page in drifted:
            print(f"{page.relative_to(ROOT)}: generated regions have drifted", file=sys.stderr)
        if drifted:
            print("run: .venv/bin/python scripts/generate_docs.py", file=sys.stderr)
        return 1 if drifted else 0
    for page in drifted:
        page.write_text(wanted[page][1])
        print(f"wrote {page.relative_to(ROOT)}")
    return 0
