"""Users, API keys and grants: ``/admin/users``, ``/admin/api-keys``, ``/admin/grants``.

An API key is generated here (``aimem_common.auth.new_api_key``); only its sha256 and a
display prefix go to the writer, and the plaintext is returned once, in the create response.
"""

from __future__ import annotations

import asyncio
import sqlite3

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from aimem_common.auth import new_api_key
from aimem_query.deps import read, send
from aimem_common.models import DbId
from aimem_query.web.passwords import hash_password

router = APIRouter()


def _users(conn: sqlite3.Connection) -> list[dict]:
    rows = conn.execute(
        "SELECT u.id, u.name, u.is_root, u.created_at, u.disabled_at,"
        " (SELECT count(*) FROM api_keys k WHERE k.user_id = u.id AND k.revoked_at IS NULL) AS keys"
        " FROM users u ORDER BY u.name"
    ).fetchall()
    return [dict(r) | {"is_root": bool(r["is_root"])} for r in rows]


def _keys(conn: sqlite3.Connection, user: str | None) -> list[dict]:
    sql = (
        "SELECT k.id, u.name AS user, k.name, k.prefix, k.created_at, k.revoked_at, k.last_used_at"
        " FROM api_keys k JOIN users u ON u.id = k.user_id"
    )
    args: tuple = ()
    if user:
        sql += " WHERE u.name = ?"
        args = (user,)
    return [dict(r) for r in conn.execute(sql + " ORDER BY k.id", args).fetchall()]


def _grants(conn: sqlite3.Connection, user: str | None) -> list[dict]:
    sql = (
        "SELECT u.name AS user, g.workspace, g.project, g.can_read, g.can_write"
        " FROM grants g JOIN users u ON u.id = g.user_id"
    )
    args: tuple = ()
    if user:
        sql += " WHERE u.name = ?"
        args = (user,)
    rows = conn.execute(sql + " ORDER BY u.name, g.workspace, g.project", args).fetchall()
    return [dict(r) | {"can_read": bool(r["can_read"]), "can_write": bool(r["can_write"])} for r in rows]


class UserBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    is_root: bool = False


class PasswordBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    password: str | None = Field(..., min_length=8, max_length=1024)


class KeyBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user: str
    name: str | None = Field(None, max_length=128)


class GrantBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user: str
    workspace: str = "*"
    project: str = "*"
    can_read: bool = True
    can_write: bool = False
    remove: bool = False


@router.get("/users")
async def list_users(request: Request) -> dict:
    users = await read(request, _users)
    return {"users": users, "count": len(users)}


@router.post("/users")
async def create_user(body: UserBody, request: Request) -> dict:
    return await send(request, "user.create", body.model_dump(), timeout_s=30)


@router.delete("/users/{name}")
async def delete_user(name: str, request: Request) -> dict:
    return await send(request, "user.delete", {"name": name}, timeout_s=30)


@router.put("/users/{name}/password")
async def set_password(name: str, body: PasswordBody, request: Request) -> dict:
    """Set (``password``, 8–1024 characters) or clear (``null``) a user's web-login password.

    The argon2id hash is made here; only the hash goes to the writer (``user.passwd``),
    which also ends the user's web sessions. Returns ``{"name", "sessions_ended",
    "password_changed_at"}``.

    Raises:
        NotFoundError: no such user. BadRequestError: a password shorter than 8 characters.
    """
    digest = None if body.password is None else await asyncio.to_thread(hash_password, body.password)
    return await send(request, "user.passwd", {"name": name, "password_hash": digest}, timeout_s=30)


@router.get("/api-keys")
async def list_keys(request: Request, user: str | None = None) -> dict:
    keys = await read(request, _keys, user)
    return {"api_keys": keys, "count": len(keys)}


@router.post("/api-keys")
async def create_key(body: KeyBody, request: Request) -> dict:
    """Create a key for ``user``; the plaintext ``key`` is in this response only."""
    key, prefix, digest = new_api_key()
    result = await send(
        request, "apikey.create", {"user": body.user, "name": body.name, "key_hash": digest, "prefix": prefix},
        timeout_s=30,
    )
    return {**result, "key": key}


@router.delete("/api-keys/{key_id}")
async def revoke_key(key_id: DbId, request: Request) -> dict:
    return await send(request, "apikey.revoke", {"key_id": key_id}, timeout_s=30)


@router.get("/grants")
async def list_grants(request: Request, user: str | None = None) -> dict:
    grants = await read(request, _grants, user)
    return {"grants": grants, "count": len(grants)}


@router.put("/grants")
async def set_grant(body: GrantBody, request: Request) -> dict:
    return await send(request, "grant.set", body.model_dump(), timeout_s=30)
