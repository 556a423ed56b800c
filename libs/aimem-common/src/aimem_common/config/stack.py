"""The stack's shape: its five services, their ports and the packages that run them."""

from __future__ import annotations


DEFAULT_PORT_BASE = 8701
SERVICES = ("ingress", "query", "mcp-gateway", "writer", "maintainer")
# Port offsets from port_base, in the order of DESIGN.md "Ports and endpoints".
PORT_OFFSETS = {"ingress": 0, "query": 1, "mcp-gateway": 2, "writer": 3, "maintainer": 4}
# Service name -> its Python package (`python -m <package>` runs it), in start order: the
# writer first, because it migrates the DB the readers wait for.
SERVICE_MODULES = {
    "writer": "aimem_writer",
    "ingress": "aimem_ingress",
    "query": "aimem_query",
    "mcp-gateway": "aimem_mcp",
    "maintainer": "aimem_maintainer",
}
