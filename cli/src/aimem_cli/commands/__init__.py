"""Command groups of the `aimem` CLI, one module each."""
