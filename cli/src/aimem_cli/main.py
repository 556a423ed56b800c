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
    app()


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
