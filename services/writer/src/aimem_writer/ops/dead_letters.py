"""``dead_letter.resolve``: mark dead letters as sent again (``/admin/dead-letters/replay``).

Dead letters themselves are written by the batch (``aimem_writer.batch``), not by an op.
"""

from __future__ import annotations

from aimem_common.commands import Envelope
from aimem_common.commands.admin import DeadLetterResolve

from aimem_writer.registry import handler
from aimem_writer.tx import Tx


@handler("dead_letter.resolve")
def dead_letter_resolve(tx: Tx, env: Envelope, cmd: DeadLetterResolve) -> dict:
    """Stamp ``replayed_at`` on the open dead letters among ``cmd.ids`` (audited).

    Returns ``{"resolved": [ids]}`` (ascending; unknown or already replayed ids left out).
    """
    resolved = []
    for dl_id in sorted(set(cmd.ids)):
        cur = tx.conn.execute("UPDATE dead_letters SET replayed_at = ? WHERE id = ? AND replayed_at IS NULL",
                              (tx.now, dl_id))
        if cur.rowcount:
            resolved.append(dl_id)
    if resolved:
        tx.audit("dead_letter.resolve", None, {"ids": resolved})
    return {"resolved": resolved}
