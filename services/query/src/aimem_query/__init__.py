"""aimem query service."""
