"""``authenticate_from_loop``: only a user API key costs a trip to a reader thread."""

from __future__ import annotations

import asyncio

import pytest

from aimem_common.auth import ANONYMOUS, ROOT, authenticate_from_loop
from aimem_common.errors import UnauthorizedError


class CountingPool:
    """Stands in for a ``ReaderPool``: counts the reads and answers as ``authenticate`` would
    for a key it does not know (auth on) or anonymous (auth off)."""

    def __init__(self) -> None:
        self.reads = 0

    async def run(self, fn, header, *, root_token):
        self.reads += 1
        if root_token is None:
            return ANONYMOUS
        raise UnauthorizedError("unknown or revoked bearer token", code="unauthorized")


def auth(pool: CountingPool, header: str | None, root_token: str | None):
    return asyncio.run(authenticate_from_loop(pool, header, root_token=root_token))


def test_root_token_missing_and_auth_off_are_decided_without_a_read():
    pool = CountingPool()
    assert auth(pool, "Bearer s3cret", "s3cret") is ROOT
    assert auth(pool, None, None) is ANONYMOUS
    assert auth(pool, "Bearer something", None) is ANONYMOUS
    for header in (None, "Bearer wrong", "Basic s3cret"):
        with pytest.raises(UnauthorizedError):
            auth(pool, header, "s3cret")
    assert pool.reads == 0


def test_a_user_key_is_looked_up_on_the_pool():
    pool = CountingPool()
    with pytest.raises(UnauthorizedError):
        auth(pool, "Bearer aim_unknownkey", "s3cret")
    assert auth(pool, "Bearer aim_unknownkey", None) is ANONYMOUS
    assert pool.reads == 2
