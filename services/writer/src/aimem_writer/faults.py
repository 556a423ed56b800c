"""Which failures are store faults: the disk or the file system refused a write.

A store fault says nothing about the command: the same batch succeeds once space returns or
the device recovers. So it is never counted toward giving a command up — the writer holds
the batch, retries it with backoff and reports itself unhealthy meanwhile (``consumer.py``).
Everything else (a handler bug, a constraint the data breaks) is about the command.
"""

from __future__ import annotations

import errno
import sqlite3

from aimem_common.errors import StoreFaultError

# Primary SQLite result codes (https://sqlite.org/rescode.html) that mean "the store, not
# the statement": PERM, BUSY, LOCKED, NOMEM, READONLY, IOERR, FULL, CANTOPEN, PROTOCOL.
_SQLITE_FULL = 13
_SQLITE_STORE_CODES = {3, 5, 6, 7, 8, 10, 13, 14, 15}
_DISK_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT}
# EACCES/EPERM (PermissionError): a data dir whose owner or mode changed under the writer
# (a chown, a volume remounted) refuses every write alike, whatever the command.
_IO_ERRNOS = {errno.EIO, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.ENOMEM, errno.EMFILE, errno.ENFILE,
              errno.EACCES, errno.EPERM}


def store_fault(exc: BaseException) -> StoreFaultError | None:
    """Return a ``StoreFaultError`` (``data.reason`` ``disk_full``|``io_error``) for ``exc``, or None.

    Recognises ``sqlite3.Error`` by its primary result code and ``OSError`` by errno
    (no space, I/O, read-only, out of memory or descriptors, permission denied).
    """
    if isinstance(exc, StoreFaultError):
        return exc
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)  # set by the library (Python ≥ 3.11)
        if code is None or (code & 0xFF) not in _SQLITE_STORE_CODES:
            return None
        reason = "disk_full" if (code & 0xFF) == _SQLITE_FULL else "io_error"
        return StoreFaultError(f"database: {exc}", data={"reason": reason, "store": "db"})
    if isinstance(exc, OSError) and exc.errno in _IO_ERRNOS:
        reason = "disk_full" if exc.errno in _DISK_FULL_ERRNOS else "io_error"
        return StoreFaultError(f"wiki: {exc}", data={"reason": reason, "store": "wiki"})
    return None
