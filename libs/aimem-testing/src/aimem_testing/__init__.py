"""Test support for aimem, installed by ``make install`` (requirements-dev.txt), never shipped.

* ``aimem_testing.seed``: ``Seeder``, a migrated SQLite store filled row by row (no writer).
* ``aimem_testing.stack``: ``ServiceProc`` (one service process) and ``LocalStack``
  (``aimem up``), both on free ports, waiting for ``/healthz``.
* ``aimem_testing.fake_llm``: ``FakeLLM``, an OpenAI-compatible server over real HTTP.
* ``aimem_testing.fake_vendors``: ``FakeVendor``, the Anthropic Messages, OpenAI Responses
  and Gemini APIs on loopback for the real agent CLIs, driven by a ``Step`` plan.
* ``aimem_testing.agents``: ``ensure_agents()``, the pinned agent CLIs from npm (cached).
* ``aimem_testing.probe``: ``wait_for`` and read-only ``db_rows`` for e2e assertions.
* ``aimem_testing.gitrepo``: ``git``, ``make_repo`` (real repositories, worktrees,
  submodules) and ``wait_for`` (poll until truthy).
"""
