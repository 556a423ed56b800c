"""The read layer: the only way any service (query, mcp-gateway, ingress, maintainer) reads.

* ``pool.ReaderPool`` — read-only connections with a per-call time budget,
  ``await pool.run(fn, *args)`` off the loop; every service context holds one as ``read_pool``.
* ``scopes`` — the one scope resolver: names ↔ ids (``find``/``resolve``...), also called by
  the writer on its own connection; the lookup SQL exists only there.
* ``search_service`` — the one search orchestration (scopes → grants → embedding → search →
  ``_global`` hits → access bumps) behind REST and MCP; ``search`` — the ranking itself
  (FTS + entities + links + vectors, RRF, authority); ``text`` — the one tokenizer/stopword list.
* ``briefing`` — a project's rules and slots, and the structured briefing snapshot.
* ``pages``, ``sessions``, ``handoffs``, ``messages``, ``proposals``, ``status`` — listings and counts.
* ``access`` — the once-a-minute ``page.access`` throttle; ``query_embed`` — the question's vector.

Every query function is sync with signature ``fn(conn, ...)`` and returns JSON-ready dicts.
"""

from aimem_common.read.pool import ReaderPool  # noqa: F401  (public API)
