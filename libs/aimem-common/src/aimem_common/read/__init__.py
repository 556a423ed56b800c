"""The read side shared by query, mcp-gateway, ingress and maintainer (one implementation).

* ``pool.ReaderPool`` — read-only connections, ``await pool.run(fn, *args)`` off the loop.
* ``scopes`` — names → ids, fail closed (``NotFoundError``).
* ``pages`` — page by path/id with body, frontmatter, links, backlinks; recent; graph.
* ``search`` — ``memory_query`` (FTS + entities + links + vectors, RRF, authority).
* ``sessions``, ``handoffs``, ``messages``, ``status`` — listings and counts.
* ``access`` — the once-a-minute ``page.access`` throttle shared by query and MCP.

Every query function is sync with signature ``fn(conn, ...)`` and returns JSON-ready dicts.
"""

from aimem_common.read.pool import ReaderPool  # noqa: F401  (public API)
