"""What a tool call gets: the service context (built once in the lifespan) and the caller.

``GatewayContext`` (a ``ServiceContext``, on ``app.state.ctx``) holds the dependencies every
tool needs (settings, the bus, the read pool, the NATS client for maintainer requests, the
query embedder); the lifespan builds it and hands it to ``registry.build_server``. ``ToolCall`` is per call: the authenticated principal, the
context, and the helpers tools share (scope resolution, writer round trips, maintainer
requests). Nothing here is a module-level global.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aimem_common import admission, maint_rpc
from aimem_common.config import Settings
from aimem_common.errors import BadRequestError, ForbiddenError, NotFoundError
from aimem_common.models import Scope, validate_name
from aimem_common.commands import make_envelope
from aimem_common.read import scopes, visibility
from aimem_common.search.access import AccessThrottle
from aimem_common.readpool import ReaderPool
from aimem_common.search.query_embed import QueryEmbedder
from aimem_common.search.service import Searcher
from aimem_common.rerank import RerankStage
from aimem_common.service import ServiceContext

from aimem_mcp.transport import McpEndpoint

if TYPE_CHECKING:
    from aimem_common.auth import Principal


@dataclass(slots=True, kw_only=True)
class GatewayContext(ServiceContext):
    """Dependencies of the gateway's tools (one per process, built in the lifespan)."""

    read_pool: ReaderPool
    access: AccessThrottle
    endpoint: McpEndpoint
    searcher: Searcher  # memory_query (built from the pool, embedder, reranker, bus and access throttle)
    embedder: QueryEmbedder | None = None  # the question's vector for memory_query (None: FTS only)
    reranker: RerankStage | None = None  # the optional cross-encoder stage (rerank.provider)

    async def health(self) -> dict[str, Any]:
        """The shared checks plus ``mcp`` (both session managers attached) and ``mcp_sessions``
        (``idle_timeout_s``: how long a stateful session may stay quiet before it is closed)."""
        return {**await ServiceContext.health(self), "mcp": self.endpoint.stateful is not None,
                "mcp_sessions": {"idle_timeout_s": self.settings.mcp.session_idle_timeout_s}}


@dataclass(slots=True)
class ToolCall:
    """One tool invocation: who calls, through which context, and the tool's name."""

    gw: GatewayContext
    principal: "Principal"
    tool: str

    @property
    def actor(self) -> str:
        """The actor recorded on commands and audit rows (the principal's name)."""
        return self.principal.name

    @property
    def settings(self) -> Settings:
        return self.gw.settings

    # -- scopes ------------------------------------------------------------------------
    def names(self, workspace: str | None, project: str | None) -> tuple[str, str]:
        """Validate a ``workspace``/``project`` pair; the workspace defaults to the server's.

        Raises:
            BadRequestError: missing project or an invalid name (-32602 to the client).
        """
        if not project:
            raise BadRequestError(
                "project is required: static clients pass workspace + project on every project-scoped call",
                code="scope_required",
            )
        ws = workspace or self.settings.workspace_default
        return validate_name(ws, "workspace"), validate_name(project, "project")

    async def read_scope(self, workspace: str | None, project: str | None) -> Scope:
        """Resolve a scope for a read: it must exist (fail closed) and be readable.

        A non-root caller gets the same ``not_found`` for an unknown project and for one it
        may not read (``visibility.resolve_readable``): no probing which projects exist.

        Raises:
            BadRequestError: missing/invalid names.
            NotFoundError: unknown or unreadable (non-root: ``not_found``; root:
                ``workspace_not_found`` / ``project_not_found``).
        """
        ws, pj = self.names(workspace, project)
        return await self.read(visibility.resolve_readable, self.principal, ws, pj)

    def write_names(self, workspace: str | None, project: str | None) -> tuple[str, str]:
        """Validate names for a write (the scope may not exist yet) and check the grant.

        Raises:
            BadRequestError: missing/invalid names.
            ForbiddenError: the principal may not write it.
        """
        ws, pj = self.names(workspace, project)
        if not self.principal.can_write(ws, pj):
            raise ForbiddenError(f"{self.actor} may not write {ws}/{pj}", data={"workspace": ws, "project": pj})
        return ws, pj

    async def select_project_id(self, args: Any) -> None:
        """Resolve ``args.project_id`` (a stable id) into ``args.workspace``/``args.project``.

        The project must exist and be readable by the caller (a non-root caller gets the same
        ``not_found`` for an unknown id and an unreadable one); a given ``workspace`` must be
        the project's. Nothing is created.

        Raises:
            NotFoundError: unknown, unreadable, or in another workspace.
        """
        pid = args.project_id
        scope = await self.read(scopes.find_by_id, pid)
        if scope is None or (args.workspace and args.workspace != scope.workspace):
            raise NotFoundError(f"project id {pid!r} not found", code="not_found", data={"project_id": pid})
        await self.read(visibility.resolve_readable, self.principal, scope.workspace, scope.project)
        args.workspace, args.project, args.project_id = scope.workspace, scope.project, None

    def require_root(self, what: str) -> None:
        """Refuse ``what`` unless the principal is root (e.g. ``any_owner=true``)."""
        if not self.principal.is_root:
            raise ForbiddenError(f"{what} is root-only", code="forbidden")

    # -- I/O ---------------------------------------------------------------------------
    async def read(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        """Run a sync read function ``fn(conn, ...)`` on the pool (worker thread)."""
        return await self.gw.read_pool.run(fn, *args, **kwargs)

    async def command(
        self, op: str, payload: dict[str, Any], *, workspace: str, project: str, timeout_s: float | None = None
    ) -> dict[str, Any]:
        """Send ``op`` to the writer and wait for its reply (read-your-write afterwards).

        Raises:
            BadRequestError: the payload fails the op's model.
            BusTimeoutError: no reply in time (the write may still apply).
            AdmissionRefusedError: an ``[admission]`` webhook refused a destructive op.
            AimemError subclass: the writer's typed error (e.g. ``precondition_failed``).
        """
        # [admission] webhooks, ahead of the writer (never inside its transaction).
        await admission.admit(self.gw.settings, op, payload, workspace=workspace, project=project, actor=self.actor,
                              telemetry=self.gw.telemetry)
        env = make_envelope(op, payload, workspace=workspace, project=project, actor=self.actor)
        return await self.gw.bus.request(env, timeout_s=timeout_s)

    async def maintainer(
        self, job: str, args: dict[str, Any], *, workspace: str, project: str | None, timeout_s: float | None = None
    ) -> dict[str, Any]:
        """Ask the maintainer to run ``job`` now (``aimem.maint.<job>``) and return its result.

        Raises:
            UnavailableError: no maintainer answering (``maintainer_unavailable``).
            BusTimeoutError: no reply in time.
        """
        return await maint_rpc.call(
            self.gw.nc, job, workspace=workspace, project=project, actor=self.actor, args=args, timeout_s=timeout_s
        )
