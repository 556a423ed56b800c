"""Search: ``memory_query``'s streams, their fusion and hits, and the service that runs a search.

Sync ranking code runs on a reader thread (``ReaderPool.run``); ``service`` (``Searcher``),
``access`` (the ``page.access`` throttle) and ``query_embed`` (the question's vector) are the
event-loop side. ARCHITECTURE.md "The path of a query" walks through it.
"""
