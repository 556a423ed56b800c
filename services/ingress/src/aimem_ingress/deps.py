"""Dependencies of the ingress routes: the service context (``app.state.ctx``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from aimem_common.service import context_of
from aimem_ingress.context import IngressContext


async def ctx_of(request: Request) -> IngressContext:
    """Return the running service's context.

    ``async`` on purpose: FastAPI runs a plain ``def`` dependency in its thread pool, a
    thread hand-off per hook for a dictionary lookup.

    Raises:
        UnavailableError: ``not_ready`` (503) before the lifespan finished starting.
    """
    return context_of(request)


CtxDep = Annotated[IngressContext, Depends(ctx_of)]
