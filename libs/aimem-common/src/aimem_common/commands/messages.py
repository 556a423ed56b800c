"""Cross-project agent messages: send / pop (claim once) / cancel."""

from __future__ import annotations

from pydantic import Field

from aimem_common.commands.envelope import OpPayload, register
from aimem_common.commands.freetext import FreeText
from aimem_common.models import DbId

INBOX_DEPTH_CAP = 200


@register("message.send")
class MessageSend(OpPayload):
    """Send a message from the envelope's scope to ``to_workspace/to_project`` (must exist)."""

    to_workspace: str = "default"
    to_project: str
    body: FreeText = Field(min_length=1, max_length=16 * 1024)
    subject: FreeText | None = Field(None, max_length=512)


@register("message.pop")
class MessagePop(OpPayload):
    """Claim one pending inbox message of the envelope's scope (oldest or ``message_id``)."""

    message_id: DbId | None = None


@register("message.cancel")
class MessageCancel(OpPayload):
    """Cancel one pending outbox message, or all of them when ``message_id`` is omitted."""

    message_id: DbId | None = None
