"""The streams of ``memory_query``, one module each, run in ``ORDER``.

A new stream: a module here with its ``@stream(name, weight=…)`` ranker and the tuning
constants that justify it, and its name in ``ORDER`` at its place (a later stream may read
what an earlier one left on the ``Run``: the passage stage reads the fused top and the turns'
matching observations, links the fused top).
"""

from __future__ import annotations

import importlib

from aimem_common.search.stream import Stream, registered

ORDER = ("fts", "turns", "exact", "trigram", "entity", "vector", "superseded", "links", "passage", "recency")

for _name in ORDER:  # importing a module registers its stream
    importlib.import_module(f"{__name__}.{_name}")
if set(registered()) != set(ORDER):
    raise RuntimeError(f"streams registered {sorted(registered())} but ORDER names {sorted(ORDER)}")

STREAMS: tuple[Stream, ...] = tuple(registered()[name] for name in ORDER)
