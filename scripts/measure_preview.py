"""How long `servestack preview` takes, and what bounds it.

    .venv/bin/python scripts/measure_preview.py [--stack dev] [--runs 5] [--out results/preview]

Each run is a fresh process, as a user starts one. Three things are timed, `runs` times each,
interleaved so that a spell of load on the machine falls on all three alike:
- `servestack preview STACK`: the plan, the Pulumi program under the mock engine, the pack;
- the floor: a process that only imports the Pulumi provider SDK modules that very preview
  imported (read off its `sys.modules`, not listed by hand). The program registers those
  providers' resources in-process, so no preview can be faster than this;
- `servestack plan STACK`, which imports no provider, for scale.

Writes `timing.json` under `--out`; the docs' measurements page is generated from it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROVIDERS = ("pulumi_gcp", "pulumi_kubernetes", "pulumi_random", "pulumi_tls")
_CLI = "from infra.cli.app import main; main()"
_MODULES_OF_PREVIEW = """
import sys
from infra.cli.app import main
try:
    main()
except SystemExit:
    pass
print("\\n".join(sorted(m for m in sys.modules if m.split(".")[0] in {providers!r})),
      file=sys.stderr)
"""


def _seconds(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def provider_modules(stack: str) -> list[str]:
    """The provider SDK modules one `servestack preview STACK` imports."""
    code = _MODULES_OF_PREVIEW.format(providers=set(PROVIDERS))
    done = subprocess.run(
        [sys.executable, "-c", code, "preview", stack],
        cwd=ROOT, check=True, capture_output=True, text=True,
    )  # fmt: skip
    return [line for line in done.stderr.splitlines() if line.split(".")[0] in PROVIDERS]


def measure(stack: str, runs: int) -> dict[str, object]:
    load_before = os.getloadavg()[0]
    modules = provider_modules(stack)
    imports = f"import importlib\nfor m in {modules!r}:\n    importlib.import_module(m)"
    steps = {
        "preview": [sys.executable, "-c", _CLI, "preview", stack],
        "provider_imports": [sys.executable, "-c", imports],
        "plan": [sys.executable, "-c", _CLI, "plan", stack],
    }
    for argv in steps.values():  # warm the bytecode caches; not counted
        _seconds(argv)
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(runs):
        for name, argv in steps.items():
            times[name].append(round(_seconds(argv), 3))
    return {
        "command": f"scripts/measure_preview.py --stack {stack} --runs {runs}",
        "stack": stack,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "load_average_1m_before": round(load_before, 2),
        "provider_modules": len(modules),
        "runs_s": times,
        "median_s": {name: round(statistics.median(t), 3) for name, t in times.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="dev")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "preview")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs: give at least 1")
    result = measure(args.stack, args.runs)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "timing.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["median_s"]))


if __name__ == "__main__":
    main()
