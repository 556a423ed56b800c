"""Test support shipped with aimem-common (importable from every test directory)."""
