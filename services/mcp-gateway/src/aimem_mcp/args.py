"""Argument building blocks shared by the tool modules (scope, limits, aliases).

Scope rule: static clients (one MCP config for every repository) pass ``workspace`` and ``project`` together on every
project-scoped call; ``workspace`` may be omitted for the server's default workspace
(``default``). Reads fail closed on a scope that does not exist; writes may create it.
Aliases (names agents commonly guess): ``memory_query.query`` also accepts ``q``/``search``; limit fields
accept ``n``/``top_k``.
"""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, Field, model_validator

from aimem_common.models import WORKSPACE_DOC

from aimem_mcp.registry import ToolArgs

PROJECT_DOC = ("Project name: the `project` in the repository's .aimem.toml when it has one, else the name of "
               "the repository's top-level directory (a subdirectory or a worktree belongs to its repository).")

PROJECT_ID_DOC = ("Stable project id instead of `project` (from memory_resolve_write_target or a status): "
                  "selects an EXISTING project exactly, whatever it is renamed to, and never creates one. "
                  "With `workspace`, that must be the project's workspace.")


def limit_field(default: int, maximum: int, what: str = "results") -> Any:
    """A limit field that also accepts ``n`` and ``top_k``."""
    return Field(
        default,
        ge=1,
        le=maximum,
        validation_alias=AliasChoices("limit", "n", "top_k"),
        description=f"Maximum number of {what} (1-{maximum}, default {default}). Aliases: `n`, `top_k`.",
    )


class Scoped(ToolArgs):
    """``workspace`` + ``project``: the project a call reads or writes."""

    workspace: str | None = Field(None, description=WORKSPACE_DOC, max_length=128)
    project: str | None = Field(None, description=PROJECT_DOC + " Required unless `project_id` is given.",
                                min_length=1, max_length=128)
    project_id: str | None = Field(
        None, description=PROJECT_ID_DOC, min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")

    @model_validator(mode="after")
    def _project_or_id(self) -> "Scoped":
        if self.project is not None and self.project_id is not None:
            raise ValueError("give project or project_id, not both")
        return self
