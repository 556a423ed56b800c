"""Op handlers, one module per domain. Importing this package imports every module in it.

Add a module (``ops/users.py``, ``ops/maintenance.py``) with ``@handler("domain.verb")``
functions and it is picked up automatically; nothing else needs editing.
"""

from __future__ import annotations

import importlib
import pkgutil


def load_all() -> list[str]:
    """Import every module of this package (idempotent); return their names."""
    names = []
    for info in pkgutil.iter_modules(__path__, prefix=f"{__name__}."):
        importlib.import_module(info.name)
        names.append(info.name)
    return names


load_all()
