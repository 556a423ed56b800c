"""The ``aimem`` command (typer). Command groups live in ``commands/<group>.py``.

``aimem hook`` is dispatched before typer is imported: agents call it on every lifecycle
event, so it must start fast (it imports only the stdlib and ``aimem_cli.hookclient``).
Only ``aimem hook --help`` (``-h``) goes through typer, which documents the command
(``commands/hooks.py``) and lists it in ``aimem --help``.
"""

from __future__ import annotations

import sys


HELP = frozenset(("--help", "-h"))


def main() -> None:
    """Entry point of the ``aimem`` script."""
    if len(sys.argv) > 1 and sys.argv[1] == "hook" and not HELP.intersection(sys.argv[2:]):
        try:
            from aimem_cli.hookclient import main as hook_main
        except ImportError:  # hook client not installed: never fail the agent
            sys.exit(0)
        sys.exit(hook_main(sys.argv[2:]))
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
                     "importing", "bootstrap", "exporting", "deadletters", "operate", "agents"):
        try:
            mod = __import__(f"aimem_cli.commands.{mod_name}", fromlist=["register"])
        except ModuleNotFoundError as exc:
            if exc.name != f"aimem_cli.commands.{mod_name}":
                raise
            continue
        mod.register(app)
    return app
