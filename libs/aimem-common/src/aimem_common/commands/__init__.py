"""Command envelope and op catalogue (DESIGN.md "The bus").

Every mutation travels as an ``Envelope`` on subject ``aimem.mut.<op>``; its ``payload``
is validated by the pydantic model registered for ``op``. Modules in this package each
register the ops of one domain with ``@register("domain.verb")``; a duplicate name raises
at import time. ``OP_MODELS`` is the catalogue the writer dispatches on.
"""

from __future__ import annotations

from aimem_common.commands.envelope import (  # noqa: F401  (public API)
    OP_MODELS,
    Envelope,
    OpPayload,
    ScopeRef,
    make_envelope,
    parse_payload,
    register,
)
from aimem_common.commands import (  # noqa: F401,E402  (each import registers its ops)
    admin,
    backfills,
    handoffs,
    maintenance,
    messages,
    observations,
    pages,
    profile,
    web,
    workstreams,
)
