"""The bench's table in a terminal: every configuration's name whole and every figure in full,
in one table where the terminal holds it, in two (throughput; latency) where it does not."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from repo import REPO
from rich.console import Console

from infra.cli.bench_report import bench_table, print_bench, ratio_text
from serving.local.bench.runner import default_variants
from serving.local.bench.stats import WorkloadReport
from serving.spec.loading import load_profile

MODELS = REPO / "stacks" / "models"


def _reports() -> list[WorkloadReport]:
    variants = default_variants(load_profile(MODELS / "llama-3.1-8b.yaml"))
    return [
        WorkloadReport.model_validate(
            {
                "variant": v.name, "workload": w, "requests": 24, "failed": i % 2,
                "duration_s": 2.0, "requests_per_s": 1234.5 + i,
                "output_tokens_per_s": 56789.0 + i,
                "ttft_s": {"p50": 1.2345 + i, "p90": 2.0, "p99": 3.4567 + i},
                "itl_s": {"p50": 0.0456, "p90": 0.05, "p99": 0.0789 + i},
                "cache_hit_rate": 0.75, "client_cache_hit_rate": 0.75,
                "requests_per_replica": {"a": 12, "b": 12},
                "busiest_over_idlest": 1.0,
            }
        )
        for i, (v, w) in enumerate((v, w) for v in variants for w in v.workloads)
    ]  # fmt: skip


def _printed(width: int, reports: list[WorkloadReport]) -> str:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=width, color_system=None)
    print_bench(console, reports, {})
    return out.getvalue()


@pytest.mark.parametrize(("width", "tables"), [(120, 2), (200, 1)])
def test_names_and_figures_are_whole_in_a_terminal(width: int, tables: int) -> None:
    reports = _reports()
    text = _printed(width, reports)
    assert text.count("servestack bench --local") == tables
    assert max(map(len, text.splitlines())) <= width
    rows = [line for line in text.splitlines() if " fast-paths-" in line]
    assert "…" not in "".join(rows), "no cell cut"
    for report in reports:
        mine = [row for row in rows if f" {report.workload} " in row
                and f" {report.variant} " in row]  # fmt: skip
        assert len(mine) == tables, "the row, names whole, in each table"
        cells = "".join(mine)
        for figure in (
            f"{report.requests_per_s:,.2f}", f"{report.output_tokens_per_s:,.0f}",
            f"{report.ttft_s.p99 * 1e3:,.1f}", f"{report.itl_s.p99 * 1e3:,.1f}",  # type: ignore[operator]
            "12 12", f" {report.failed} ",
        ):  # fmt: skip
            assert figure in cells, (figure, mine)


def _router_report(variant: str, workload: str, per_s: float, hit: float) -> WorkloadReport:
    return WorkloadReport.model_validate(
        {
            "variant": variant, "workload": workload, "requests": 64, "failed": 0,
            "duration_s": 64 / per_s, "requests_per_s": per_s, "output_tokens_per_s": 50 * per_s,
            "ttft_s": {"p50": 0.5, "p90": 1.0, "p99": 2.0},
            "itl_s": {"p50": 0.01, "p90": 0.02, "p99": 0.05},
            "cache_hit_rate": hit, "requests_per_replica": {"r1": 40, "r2": 24},
            "busiest_over_idlest": 40 / 24,
        }
    )  # fmt: skip


def test_a_committed_real_engine_run_reads_back_with_the_benchs_ratios(tmp_path: Path) -> None:
    """The README's bench figures come from the committed bench.json: its reports read back
    whole, and the ratios are the bench's, ideal placement's hit rate included."""
    from infra.cli.bench import bench_ratios, load_document

    reports = [
        _router_report("fast-paths-on/power-of-two", "multi-prompt", 1.0, 0.40),
        _router_report("fast-paths-on/servestack-prefix-affinity", "multi-prompt", 1.6, 0.80),
        _router_report("fast-paths-on/servestack-precise-prefix", "multi-prompt", 1.8, 0.82),
        _router_report("fast-paths-on/power-of-two", "hot-prompt", 2.0, 0.60),
        _router_report("fast-paths-on/servestack-prefix-affinity", "hot-prompt", 2.5, 0.75),
    ]
    document = {"engine": "vllm", "reports": [r.model_dump() for r in reports]}
    (tmp_path / "bench.json").write_text(json.dumps(document))
    read, back = load_document(tmp_path / "bench.json")
    assert back == reports and read["engine"] == "vllm"
    ratios = bench_ratios("vllm", back, {"multi-prompt": 0.84, "hot-prompt": 0.85})
    assert ratios["multi-prompt: precise router/power of two, requests/s"] == pytest.approx(1.8)
    assert ratios["multi-prompt: precise router/sent-history router, requests/s"] == (
        pytest.approx(1.125)
    )
    assert ratios["multi-prompt: precise router hit rate/ideal"] == pytest.approx(0.82 / 0.84)
    assert ratios["multi-prompt: precise router busiest/idlest replica"] == pytest.approx(5 / 3)
    assert ratios["hot-prompt: servestack router/power of two, requests/s"] == pytest.approx(1.25)
    assert ratios["hot-prompt: ideal placement cache hit rate"] == 0.85
    # no precise run on hot-prompt: nothing claimed for it
    assert not [key for key in ratios if key.startswith("hot-prompt: precise")]


def test_the_readme_excerpt_has_the_columns_named_and_no_other() -> None:
    reports = _reports()[:2]
    out = io.StringIO()
    Console(file=out, width=170).print(bench_table(reports, "vllm", ("req/s", "cache hit")))
    text = out.getvalue()
    assert "vLLM 0.22 CPU build" in text and "req/s" in text and "hit" in text
    assert "TTFT" not in text and "failed" not in text
    assert f"{reports[0].requests_per_s:,.2f}" in text
    with pytest.raises(ValueError, match="TTFT p50 ms"):
        bench_table(reports, "vllm", ("TTFT p50",))
    assert ratio_text("x: cache hit rate", 0.456) == "0.46"
    assert ratio_text("x: a/b, requests/s", 1.716) == "1.72x"


def test_the_bound_of_any_router_is_fitted_on_the_runs_of_the_workload() -> None:
    """Hand-worked: two runs, 49.8 s at 0.56 uncached and 29.0 s at 0.19, fit 18.3 s fixed and
    56.2 s for all prompts uncached; ideal placement (0.84 hit) would take 27.3 s, 1.82x power
    of two's run."""
    from infra.cli.bench import bench_ratios
    from serving.local.bench.prefix import uncached_fit

    power_two = _router_report("fast-paths-on/power-of-two", "multi-prompt", 64 / 49.8, 0.44)
    history = _router_report(
        "fast-paths-on/servestack-prefix-affinity", "multi-prompt", 64 / 29.0, 0.81
    )
    fit = uncached_fit([power_two, history], "multi-prompt")
    assert fit is not None
    assert fit.fixed_s == pytest.approx(18.3, abs=0.05)
    assert fit.all_uncached_s == pytest.approx(56.2, abs=0.05)
    assert fit.duration_s(0.84) == pytest.approx(27.3, abs=0.05)
    ratios = bench_ratios("vllm", [power_two, history], {"multi-prompt": 0.84})
    fitted = ratios["multi-prompt: ideal placement/power of two, requests/s (fitted)"]
    assert fitted == pytest.approx(1.82, abs=0.005)
    assert uncached_fit([power_two], "multi-prompt") is None, "one run fits no line"


def test_a_json_run_whose_requests_failed_names_their_errors(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A --json run draws no table, the table's error lines with it: the failure's message still
    # ends with them. The runner is replaced (requests cannot be made to fail on cue through a
    # real local Ray); what is checked is the CLI's own output.
    from typer.testing import CliRunner

    from infra.cli import bench as bench_run
    from infra.cli.app import app

    reports = [r.model_copy(update={"errors": [f"HTTP 503 from {r.variant}"] if r.failed else []})
               for r in _reports()]  # fmt: skip
    failed = [r for r in reports if r.failed]
    document = {"reports": [r.model_dump() for r in reports]}
    monkeypatch.setattr(
        bench_run, "run",
        lambda *args, **kwargs: bench_run.BenchOutcome(document, reports, {}, {}),
    )  # fmt: skip
    result = CliRunner().invoke(
        app, ["bench", "--local", "--model", "llama-3.1-8b", "--json", "--out", str(tmp_path)],
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 1
    assert json.loads(result.stdout) == document, "stdout is the document alone"
    message = result.stderr.index("error: requests failed")
    for report in failed:
        line = f"{report.variant} {report.workload}: HTTP 503 from {report.variant}"
        assert -1 < result.stderr.find(line) < message, "each error, before the message"
