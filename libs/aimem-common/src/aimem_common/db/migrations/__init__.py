"""The shipped migrations, one module per migration: ``mNN_<what>.py`` holds its ``SQL`` literal.

To add one: write ``mNN_<what>.py`` (the next number; a one-line docstring, the reasons as
comments, ``SQL`` as one plain string literal) and append ``(NN, mNN_<what>.SQL)`` to
``MIGRATIONS`` in ``aimem_common.db.schema``. A shipped module is frozen (its text is pinned by
sha256 in ``tests/unit/test_migrations_frozen.py``): never edit it, add a new one instead.
"""
