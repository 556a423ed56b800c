"""The op-handler registry: one sync handler per op of ``aimem_common.commands.OP_MODELS``.

Shape borrowed from sqlite-utils ``Migrations`` (decorator registry, duplicate names fail at
import) and datasette's write thread (handlers are *sync* and run on the single writer
thread, inside the batch transaction)::

    from aimem_common.commands.pages import PageDelete
    from aimem_writer.registry import handler
    from aimem_writer.tx import Tx

    @handler("page.delete")
    def page_delete(tx: Tx, env: Envelope, cmd: PageDelete) -> dict:
        return tx.pages.delete(tx.scope(), cmd.path, reason="deleted")

The returned dict is the ``result`` of the reply ``{cmd_id, ok, result}``. Raise an
``aimem_common.errors.AimemError`` subclass to answer with an error: the command is rolled
back alone (its rows, staged wiki files and events vanish; ``batch.py`` re-applies the batch
with a SAVEPOINT per command for that) and the batch goes on. A handler may run more than
once per delivery (a batch is re-applied after any rollback): keep every effect inside the
transaction or the staged wiki files. Handlers live in modules of the ``aimem_writer.ops`` package, which imports every
module it contains (``aimem_writer.ops.load_all``), so adding ``ops/<domain>.py`` needs no edit
anywhere else. ``tests/unit/test_registry.py`` asserts every op in ``OP_MODELS`` has one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aimem_common.commands import OP_MODELS, OpPayload

if TYPE_CHECKING:
    from aimem_common.commands import Envelope

    from aimem_writer.tx import Tx

HandlerFn = Callable[["Tx", "Envelope", Any], dict[str, Any]]


class DuplicateHandlerError(ValueError):
    """Two handlers claim the same op name (raised at import time)."""


@dataclass(frozen=True, slots=True)
class Handler:
    """A registered op: its name, payload model and sync function."""

    op: str
    model: type[OpPayload]
    fn: HandlerFn


_HANDLERS: dict[str, Handler] = {}


def handler(op: str) -> Callable[[HandlerFn], HandlerFn]:
    """Register ``fn(tx, env, cmd) -> dict`` as the handler of ``op``.

    The payload model comes from ``aimem_common.commands.OP_MODELS[op]``; the writer validates
    the payload with it before calling ``fn``.

    Raises:
        DuplicateHandlerError: ``op`` already has a handler.
        KeyError: ``op`` is not in the op catalogue (register its payload model first).
    """

    def deco(fn: HandlerFn) -> HandlerFn:
        if op in _HANDLERS:
            raise DuplicateHandlerError(
                f"op {op!r} already handled by {_HANDLERS[op].fn.__module__}.{_HANDLERS[op].fn.__qualname__}"
            )
        if op not in OP_MODELS:
            raise KeyError(f"op {op!r} has no payload model in aimem_common.commands (register it there)")
        _HANDLERS[op] = Handler(op, OP_MODELS[op], fn)
        return fn

    return deco


def get(op: str) -> Handler | None:
    """Return the handler of ``op`` (None when unknown)."""
    return _HANDLERS.get(op)


def handlers() -> dict[str, Handler]:
    """Return a copy of every registered handler by op name (after ``ops.load_all()``)."""
    return dict(_HANDLERS)
