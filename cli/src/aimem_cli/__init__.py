"""The `aimem` command-line tool."""
