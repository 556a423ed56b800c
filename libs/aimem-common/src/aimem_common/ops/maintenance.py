"""Maintainer ops: sweep, lint report, consolidation jobs, proposals, embeddings."""

from __future__ import annotations

from aimem_common.ops.envelope import OpPayload, register  # noqa: F401
