"""aimem maintainer service."""
