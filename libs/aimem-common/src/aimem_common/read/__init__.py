"""The read layer: sync SQL functions of a connection, the only way any service reads.

Every function here has the signature ``fn(conn, ...)`` and returns JSON-ready values; a
service runs it on a reader thread (``aimem_common.readpool.ReaderPool.run``). No ``async
def`` lives here (``tests/test_architecture.py``): the event-loop side of a search is
``aimem_common.search`` (``service``, ``access``, ``query_embed``).

* ``scopes`` — the one scope resolver: names ↔ ids (``find``/``resolve``...), also called by
  the writer on its own connection; the lookup SQL exists only there.
* ``text`` — the one tokenizer/stopword list (the search streams shape questions with it);
  ``textindex`` and ``vectors`` — the page text index and chunk vectors the streams read.
* ``briefing`` — a project's rules and slots, and the structured briefing snapshot.
* ``pages``, ``sessions``, ``handoffs``, ``messages``, ``proposals``, ``status`` — listings and counts.
"""
