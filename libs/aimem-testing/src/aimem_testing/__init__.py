"""Test support for aimem, installed by ``make install`` (requirements-dev.txt), never shipped.

* ``aimem_testing.seed``: ``Seeder``, a migrated SQLite store filled row by row (no writer).
* ``aimem_testing.stack``: ``ServiceProc`` (one service process) and ``LocalStack``
  (``aimem up``), both on free ports, waiting for ``/healthz``.
* ``aimem_testing.fake_llm``: ``FakeLLM``, an OpenAI-compatible server over real HTTP.
* ``aimem_testing.gitrepo``: ``git``, ``make_repo`` (real repositories, worktrees,
  submodules) and ``wait_for`` (poll until truthy).
"""
