"""The `servestack` command line: one Typer app (`app`) and the commands it registers."""
