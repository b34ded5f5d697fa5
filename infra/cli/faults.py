"""`servestack faults --local`: the fault runs of `serving.local.faults.runs`, from a stack's model,
as a table and a JSON file. Registered on the CLI by `infra/cli/app.py`."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from infra.cli.common import console, one_model, positive, require_local
from infra.platform.config import load_stack
from infra.platform.stack_config import DEFAULT_STACK
from serving.errors import ServestackError, unknown_key_fix

# The short form CI runs: every fault in one local Ray with servestack's HAProxy setting (no
# reproduction), shorter waits.
SHORT_TIMING = {"spread_s": 2.0, "fault_at_s": 3.0, "scale_hold_s": 3.0, "late_spread_s": 1.5,
                "recover_timeout_s": 90.0}  # fmt: skip
COLUMNS = (
    "session", "fault", "hard stop s", "streams", "accepted", "completed", "refused", "cut",
    "hung", "late lost", "1st ok after s", "recovered s", "slowest fail s",
)  # fmt: skip


def print_faults(console: Console, run: object) -> None:
    from serving.local.faults.sessions import FaultRun

    assert isinstance(run, FaultRun)
    table = Table(title="servestack faults --local (simulated engine; real Ray Serve and HAProxy)")
    for column in COLUMNS:
        table.add_column(column, justify="left" if column in ("session", "fault") else "right")

    def seconds(value: float | None) -> str:
        return "—" if value is None else f"{value:.1f}"

    for report in run.reports:
        table.add_row(
            report.session, report.fault, str(report.hard_stop_s), str(report.streams),
            str(report.accepted), str(report.completed), str(report.refused), str(report.cut),
            str(report.hung), str(report.late_failed),
            seconds(report.first_success_after_fault_s), seconds(report.recovered_s),
            seconds(report.longest_failure_s),
        )  # fmt: skip
    console.print(table)
    for outcome in run.sessions:
        console.print(
            f"session {outcome.session.name}: {outcome.status} in {outcome.took_s:.0f} s, "
            f"{outcome.left_behind} processes left behind"
            + (f"; {outcome.detail}" if outcome.detail else ""),
            highlight=False,
        )


def run_faults(
    stack: str,
    model: str | None,
    *,
    faults: list[str] | None,
    short: bool,
    streams: int,
    output_tokens: int,
    replicas: int,
    time_scale: float,
    seed: int,
    out: Path | None,
) -> None:
    from serving.local.engine.simulation import settings_from_plan
    from serving.local.faults import runs
    from serving.local.faults.load import FaultLoad
    from serving.local.faults.sessions import FaultRun, run_sessions

    loaded = load_stack(stack)
    spec = one_model(loaded.profiles, model, loaded.path)
    wanted = faults or list(runs.FAULTS)
    for name in wanted:
        if name not in runs.FAULTS:
            raise ServestackError(
                "command line", "--fault", f"unknown fault '{name}'",
                unknown_key_fix(name, runs.FAULTS, "faults"),
            )  # fmt: skip
    settings = settings_from_plan(spec, time_scale=time_scale)
    load = FaultLoad.model_validate(
        {"streams": streams, "output_tokens": output_tokens, "replicas": replicas, "seed": seed}
        | (SHORT_TIMING if short else {})
    )
    # A stream's length: one decode step per token with every stream of a replica running.
    per_replica = -(-streams // replicas)
    stream_s = output_tokens * settings.decode_step(per_replica)
    sessions = runs.default_sessions(stream_s, wanted, reproduce=not short)  # type: ignore[arg-type]
    console.print(
        f"{spec.name}: {streams} streams of {output_tokens} tokens (about {stream_s:.0f} s each) "
        f"on {replicas} replicas, per fault; sessions: "
        + ", ".join(f"{s.name} (hard stop {s.hard_stop_s} s)" for s in sessions),
        highlight=False,
    )

    def progress(r: runs.FaultReport) -> None:
        console.print(
            f"  {r.session} {r.fault}: {r.completed}/{r.streams} completed, {r.cut} cut, "
            f"{r.hung} hung",
            highlight=False,
        )

    outcomes = run_sessions(spec, settings, sessions, load, stream_s, on_report=progress)
    run = FaultRun(
        command=shlex.join(["servestack", *sys.argv[1:]]), model=spec.name,
        stream_s=round(stream_s, 1), time_scale=time_scale, load=load, sessions=outcomes,
    )  # fmt: skip
    print_faults(console, run)
    out_dir = out if out is not None else Path("faults") / spec.name
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "faults.json").write_text(run.model_dump_json(indent=2) + "\n")
    console.print(f"wrote {out_dir / 'faults.json'}", highlight=False)
    if not run.clean:
        # The figures are written either way; a hang or a leftover process fails the command.
        raise typer.Exit(1)


def faults_command(
    stack: Annotated[
        str, typer.Argument(help="Stack name: stacks/Pulumi.<STACK>.yaml.")
    ] = DEFAULT_STACK,
    model: Annotated[str | None, typer.Option(help="The stack model to run.")] = None,
    local: Annotated[bool, typer.Option("--local", help="Run on this machine's CPU.")] = False,
    fault: Annotated[
        list[str] | None,
        typer.Option(
            help="Only these faults: scale-up-down, replica-actor-kill, "
            "replica-process-kill, controller-kill, gcs-restart."
        ),
    ] = None,
    short: Annotated[
        bool,
        typer.Option(
            help="CI's short form: servestack's setting only (no reproduction), shorter waits."
        ),
    ] = False,
    streams: Annotated[int, typer.Option(help="Streamed requests per fault.")] = 12,
    output_tokens: Annotated[int, typer.Option(help="Tokens per stream.")] = 400,
    replicas: Annotated[int, typer.Option(help="Replicas before each fault.")] = 2,
    time_scale: Annotated[float, typer.Option(help="Multiplies the engine's times.")] = 4.0,
    seed: Annotated[int, typer.Option(help="Seed of the prompts.")] = 7,
    out: Annotated[Path | None, typer.Option(help="[default: faults/MODEL]")] = None,
) -> None:
    """Kill a replica (its actor, its process), scale replicas up and down, kill the Serve
    controller, each under long streams; report what a client saw.

    Each session is a local Ray with real Ray Serve and HAProxy; the engine is simulated.
    """
    require_local(local, "faults")
    for value, flag in ((streams, "--streams"), (output_tokens, "--output-tokens"),
                        (replicas, "--replicas"), (time_scale, "--time-scale")):  # fmt: skip
        positive(value, flag)
    run_faults(
        stack, model, faults=fault, short=short, streams=streams,
        output_tokens=output_tokens, replicas=replicas, time_scale=time_scale, seed=seed,
        out=out,
    )  # fmt: skip


def markdown_report(run: object, json_path: str) -> str:
    """The README's account of a committed fault run: its command, its load, a row per fault
    and how each session ended, all read from the run's report."""
    from serving.local.faults.sessions import FaultRun

    assert isinstance(run, FaultRun)
    load = run.load

    def seconds(value: float | None) -> str:
        return "—" if value is None else f"{value:.1f} s"

    lines = [
        f"`{run.command}` ([JSON]({json_path})): {run.model}, {load.replicas} replicas, per fault "
        f"{load.streams} streams of {load.output_tokens} tokens (about {run.stream_s:.0f} s "
        f"each) started over {load.spread_s:g} s, the fault {load.fault_at_s:g} s in, then "
        f"{load.late_streams} more over {load.late_spread_s:g} s; Serve's graceful shutdown "
        f"{load.graceful_shutdown_s} s; a stream silent for {load.stall_s:g} s counts as hung.",
        "",
        "| session (HAProxy hard stop) | fault | streams (late) | accepted | completed | refused "
        "(status) | cut | hung | late lost | first answer after | back at target | slowest "
        "failure |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in run.reports:
        statuses = ", ".join(str(s) for s in sorted(set(r.refused_statuses)))
        refused = f"{r.refused} ({statuses})" if r.refused else "0"
        lines.append(
            f"| {r.session} ({r.hard_stop_s} s) | {r.fault} | {r.streams} "
            f"({r.streams - r.in_flight}) | {r.accepted} | {r.completed} | {refused} | {r.cut} | "
            f"{r.hung} | {r.late_failed} | {seconds(r.first_success_after_fault_s)} | "
            f"{seconds(r.recovered_s)} | {seconds(r.longest_failure_s)} |"
        )
    lines.append("")
    lines.append("Sessions: " + "; ".join(
        f"{o.session.name} {o.status} in {o.took_s:.0f} s, {o.left_behind} processes left behind"
        + (f" ({o.detail})" if o.detail else "")
        for o in run.sessions
    ) + ".")  # fmt: skip
    return "\n".join(lines)
