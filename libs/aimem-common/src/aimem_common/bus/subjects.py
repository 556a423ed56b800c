"""The bus's names: streams, subjects, durables, the two lanes, headers (DESIGN.md "The bus")."""

from __future__ import annotations

MUT_STREAM = "AIMEM_MUT"
EVT_STREAM = "AIMEM_EVT"
MUT_SUBJECTS = "aimem.mut.>"
EVT_SUBJECTS = "aimem.evt.>"
WRITER_DURABLE = "writer"
# The bulk lane: its own stream (a WorkQueue stream takes one consumer per subject, and
# ``aimem.mut.>`` already has the live one), so its back-pressure and lag are its own.
BULK_STREAM = "AIMEM_BULK"
BULK_SUBJECTS = "aimem.bulk.>"
BULK_DURABLE = "writer-bulk"
LIVE, BULK = "live", "bulk"  # the lanes: (stream, durable, subject prefix) in LANES
LANES = {LIVE: (MUT_STREAM, WRITER_DURABLE, "aimem.mut"), BULK: (BULK_STREAM, BULK_DURABLE, "aimem.bulk")}
# Core NATS (not JetStream): the writer announces whether it can store, about once a second.
WRITER_STATUS_SUBJECT = "aimem.status.writer"
REPLY_HEADER = "Aimem-Reply-To"
MSG_ID_HEADER = "Nats-Msg-Id"
# A dead-letter replay names the row it sends again (its id): when the command fails again,
# the writer keeps a new open dead letter instead of updating that row, which the replay's
# ``dead_letter.resolve`` is about to mark replayed (the failure would vanish with it).
REPLAY_HEADER = "Aimem-Replay-Of"



def mut_subject(op: str, lane: str = LIVE) -> str:
    """Return the subject of a mutation op in ``lane``, e.g. ``aimem.mut.page.write`` (live) or
    ``aimem.bulk.observation.append`` (bulk)."""
    return f"{LANES[lane][2]}.{op}"


def evt_subject(kind: str) -> str:
    """Return the subject of an event, e.g. ``aimem.evt.session.ended``."""
    return f"aimem.evt.{kind}"
