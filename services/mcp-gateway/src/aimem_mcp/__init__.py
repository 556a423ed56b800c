"""aimem mcp service."""
