"""Dependencies of the ingress routes: the service context (``app.state.ctx``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from aimem_common.service import context_of
from aimem_ingress.context import IngressContext


def ctx_of(request: Request) -> IngressContext:
    """Return the running service's context.

    Raises:
        UnavailableError: ``not_ready`` (503) before the lifespan finished starting.
    """
    return context_of(request)


CtxDep = Annotated[IngressContext, Depends(ctx_of)]
