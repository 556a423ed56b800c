"""The batch's value types: a message as fetched, a command on its way through a batch, its outcome.

Imported by the batch (``batch.py``), the consumer and its helpers (``messages.py``,
``inplace.py``); plain dataclasses with no behaviour of their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aimem_common.bus import REPLY_HEADER
from aimem_common.commands import Envelope
from aimem_common.errors import StoreFaultError

from aimem_writer.tx import Event


@dataclass(slots=True)
class Incoming:
    """One message as fetched: raw JSON, headers and its delivery count."""

    data: bytes
    headers: dict[str, str] = field(default_factory=dict)
    num_delivered: int = 1


@dataclass(slots=True)
class Outcome:
    """What to do with one message after the batch: ``ack``/``nak``/``term`` + reply."""

    action: str = "ack"
    reply: dict[str, Any] | None = None
    op: str = "unknown"
    error_code: str | None = None
    dead_letter: str | None = None  # the reason, when this command is given up


@dataclass(slots=True, eq=False)
class Command:
    """One command carried through a batch: the message, its envelope once parsed, and its
    outcome once decided (an unreadable message gets an outcome and no envelope).

    Identity, not value, tells two commands apart (``eq=False``): a batch may hold copies.
    """

    message: Incoming
    envelope: Envelope | None = None
    outcome: Outcome | None = None
    project_id: str | None = None  # the project its scope resolved to, once applied (ingest_keys)

    @property
    def waited(self) -> bool:
        """True when a caller waits for the reply (``Aimem-Reply-To``)."""
        return bool(self.message.headers.get(REPLY_HEADER))


@dataclass(slots=True)
class BatchResult:
    """Result of ``Applier.apply``: one outcome per item (same order), events, files touched."""

    outcomes: list[Outcome]
    events: list[Event] = field(default_factory=list)
    files: int = 0
    duration_s: float = 0.0
    flush_fault: StoreFaultError | None = None  # committed, but the wiki files are still owed
    settled_msgs: int = 0  # messages the consumer settled from these outcomes (a bundle is several items)
