"""aimem writer service."""
