"""aimem ingress service."""
