"""Lifecycle/admin ops (seed 003). The query service's admin API sends these."""

from __future__ import annotations

from aimem_common.ops.envelope import OpPayload, register  # noqa: F401
