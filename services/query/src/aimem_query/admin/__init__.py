"""The ``/admin`` API: lifecycle operations, history, backup, users and keys.

``router`` (prefix ``/admin``) is included by the query app; every route depends on
``require_root``. Mutations are writer ops answered after commit; reads use read-only
connections; backup streams a tarball built from a read-only snapshot.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends

from aimem_query.admin import (
    backup, dead_letters, history, lifecycle, messages, page_writes, pending, profile, purges, status, users,
)
from aimem_query.deps import require_root

router = APIRouter(prefix="/admin", tags=["admin"], dependencies=[Depends(require_root)])
for _module in (status, history, backup, lifecycle, page_writes, users, pending, dead_letters, purges, messages, profile):
    router.include_router(_module.router)
