"""The ``aimem`` command (typer). Command groups live in ``commands/<group>.py``.

``aimem hook`` is dispatched before typer is imported: agents call it on every lifecycle
event, so it must start fast (it imports only the stdlib and ``aimem_cli.hookclient``).
Only ``aimem hook --help`` (``-h``), which documents the command (``commands/hooks.py``) and
lists it in ``aimem --help``, and ``aimem hook status`` (a person's command) go through typer.
``aimem run``/``continue`` are too (``aimem_cli.managed.main``; their ``--help`` is typer's).
"""

from __future__ import annotations

import sys


HELP = frozenset(("--help", "-h"))


def main() -> None:
    """Entry point of the ``aimem`` script."""
    if len(sys.argv) > 1 and sys.argv[1] == "hook" and not HELP.intersection(sys.argv[2:]) \
            and sys.argv[2:3] != ["status"]:
        try:
            from aimem_cli.hookclient import main as hook_main
        except ImportError:  # hook client not installed: never fail the agent
            sys.exit(0)
        sys.exit(hook_main(sys.argv[2:]))
    if len(sys.argv) > 1 and sys.argv[1] in ("run", "continue") and not {"--help", "-h"} & set(
            sys.argv[2:sys.argv.index("--") if "--" in sys.argv else None]):
        from aimem_cli.managed import main as run_main  # every managed agent's start waits on this

        sys.exit(run_main(sys.argv[1:]))
    app = build_app()
    sys.exit(run_app(app, sys.argv[1:]))


def run_app(app, args: list[str]) -> int:
    """Run the typer ``app`` on ``args``; return the exit code.

    A wrong invocation (unknown command or option, a value of the wrong type or out of
    range, a missing argument) prints one line to stderr,
    ``aimem: <what is wrong> (see aimem <cmd> --help)``, and returns click's code (2), instead
    of typer's boxed usage text; ``--help`` and a group called without a subcommand print
    their help as before. Any other click error (a file that cannot be opened) is one line,
    ``aimem: <message>``, with its own code; Ctrl-C at a prompt is ``aimem: aborted`` (1).
    """
    import typer

    try:  # typer >= 0.26 carries its own copy of click
        from typer._click.exceptions import ClickException, UsageError
    except ImportError:
        from click.exceptions import ClickException, UsageError

    try:
        rv = app(args=args, prog_name="aimem", standalone_mode=False)
    except UsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # a group without its command: help already shown
            return exc.exit_code
        where = exc.ctx.command_path if exc.ctx is not None else "aimem"
        print(f"aimem: {one_line(exc.format_message())} (see {where} --help)", file=sys.stderr)
        return exc.exit_code
    except ClickException as exc:
        print(f"aimem: {one_line(exc.format_message())}", file=sys.stderr)
        return exc.exit_code
    except typer.Abort:
        print("aimem: aborted", file=sys.stderr)
        return 1
    return rv if isinstance(rv, int) else 0


def one_line(message: str) -> str:
    """``message`` on one line (whitespace runs become one space), without a final period."""
    return " ".join(message.split()).rstrip(".")


def build_app():
    """Assemble the typer app from the command modules (imported here, not at load)."""
    import typer

    from aimem_cli.commands import up

    app = typer.Typer(
        name="aimem",
        help="aimem: long-term memory shared across coding-agent CLIs.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
    )

    @app.callback()
    def _root() -> None:
        """aimem: long-term memory shared across coding-agent CLIs."""

    up.register(app)
    for mod_name in ("memory", "lifecycle", "users", "disk", "doctor", "hooks", "init", "maint", "replica",
                     "importing", "bootstrap", "exporting", "deadletters", "workstreams", "operate", "agents"):
        try:
            mod = __import__(f"aimem_cli.commands.{mod_name}", fromlist=["register"])
        except ModuleNotFoundError as exc:
            if exc.name != f"aimem_cli.commands.{mod_name}":
                raise
            continue
        mod.register(app)
    return app
