"""mkdocs hooks (mkdocs.yml `hooks:`): the committed runs under results/ join the site.

mkdocs builds only what lies under docs/, while the runs' reports and charts live in results/
beside it. A page links to them as the repository lays them out (`../../results/...` from
docs/measurements/), which a reader of the repository follows as is; here each file becomes a
site file at `results/...`, so the same link resolves in the built site and `--strict` checks it.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files, InclusionLevel

# What a page may show or link of a run (reports, charts, calibration records); logs/ and
# anything else a local run leaves are not.
SHOWN = (".json", ".png", ".yaml")


def on_files(files: Files, config: MkDocsConfig) -> Files:
    docs = Path(config.docs_dir)
    results = docs.parent / "results"
    for path in sorted(results.rglob("*")):
        if path.suffix not in SHOWN or "logs" in path.relative_to(results).parts:
            continue
        in_repo = path.relative_to(docs.parent).as_posix()
        files.append(
            File(
                f"../{in_repo}",  # where a link from docs/ finds it
                config.docs_dir,
                config.site_dir,
                config.use_directory_urls,
                dest_uri=in_repo,
                inclusion=InclusionLevel.INCLUDED,
            )
        )
    return files
