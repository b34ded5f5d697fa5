"""`servestack faults --local`: the fault runs of `serving.local.faults`, from a stack's model,
as a table and a JSON file. Registered on the CLI by `infra/cli.py`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from infra.config import DEFAULT_STACK, load_stack
from serving.errors import ServestackError, unknown_key_fix
from serving.spec import ModelSpec

# The short form CI runs: one local Ray, servestack's HAProxy setting, three faults.
SHORT_FAULTS = ("scale-up-down", "replica-actor-kill", "controller-kill")
COLUMNS = (
    "session", "fault", "hard stop s", "streams", "accepted", "completed", "refused", "cut",
    "hung", "1st ok after s", "recovered s", "slowest fail s",
)  # fmt: skip


def print_faults(console: Console, reports: list[object]) -> None:
    from serving.local.faults import FaultReport

    table = Table(title="servestack faults --local (simulated engine; real Ray Serve and HAProxy)")
    for column in COLUMNS:
        table.add_column(column, justify="left" if column in ("session", "fault") else "right")

    def seconds(value: float | None) -> str:
        return "—" if value is None else f"{value:.1f}"

    for report in reports:
        assert isinstance(report, FaultReport)
        table.add_row(
            report.session, report.fault, str(report.hard_stop_s), str(report.streams),
            str(report.accepted), str(report.completed), str(report.refused), str(report.cut),
            str(report.hung), seconds(report.first_success_after_fault_s),
            seconds(report.recovered_s), seconds(report.longest_failure_s),
        )  # fmt: skip
    console.print(table)


def faults_command(
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
    console: Console,
    pick_model: object,
) -> None:
    from serving.local import faults as runs
    from serving.local.fault_load import FaultLoad
    from serving.local.simulation import settings_from_plan

    loaded = load_stack(stack)
    spec: ModelSpec = pick_model(loaded.profiles, model, loaded.path)  # type: ignore[operator]
    wanted = list(SHORT_FAULTS) if short and not faults else (faults or list(runs.FAULTS))
    for name in wanted:
        if name not in runs.FAULTS:
            raise ServestackError(
                "command line", "--fault", f"unknown fault '{name}'",
                unknown_key_fix(name, runs.FAULTS, "faults"),
            )  # fmt: skip
    settings = settings_from_plan(spec, time_scale=time_scale)
    load = FaultLoad(streams=streams, output_tokens=output_tokens, replicas=replicas, seed=seed)
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

    reports = runs.run_sessions(spec, settings, sessions, load, on_report=progress)
    print_faults(console, list(reports))
    out_dir = out if out is not None else Path("faults") / spec.name
    out_dir.mkdir(parents=True, exist_ok=True)
    document = {
        "model": spec.name,
        "stream_s": round(stream_s, 1),
        "load": load.model_dump(),
        "time_scale": time_scale,
        "reports": [r.model_dump() for r in reports],
    }
    (out_dir / "faults.json").write_text(json.dumps(document, indent=2) + "\n")
    console.print(f"wrote {out_dir / 'faults.json'}", highlight=False)


def register(app: typer.Typer, console: Console, pick_model: object, require_local: object) -> None:
    @app.command("faults")
    def faults(
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
                help="CI's short form: servestack's setting, three faults, no reproduction."
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
        require_local(local, "faults")  # type: ignore[operator]
        for value, flag in ((streams, "--streams"), (output_tokens, "--output-tokens"),
                            (replicas, "--replicas"), (time_scale, "--time-scale")):  # fmt: skip
            if value <= 0:
                raise ServestackError("command line", flag, f"{value:g} is not allowed here",
                                      "use a positive number")  # fmt: skip
        faults_command(
            stack, model, faults=fault, short=short, streams=streams,
            output_tokens=output_tokens, replicas=replicas, time_scale=time_scale, seed=seed,
            out=out, console=console, pick_model=pick_model,
        )  # fmt: skip
