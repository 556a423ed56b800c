"""The JSON error envelope is part of the API: pin it (STYLE.md "Errors")."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from aimem_common import errors
from aimem_common.http import install_error_handlers


def make_app() -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/nf")
    def nf():
        raise errors.NotFoundError("page 'a.md' not found")

    @app.get("/pre")
    def pre():
        raise errors.PreconditionFailedError("stale write", data={"current_page_id": 7})

    @app.get("/busy")
    def busy():
        raise errors.BackPressureError("full", retry_after_s=3)

    @app.get("/boom")
    def boom():
        raise RuntimeError("secret internals")

    @app.get("/typed")
    def typed(n: int):
        return {"n": n}

    return app


def test_http_envelopes() -> None:
    c = TestClient(make_app(), raise_server_exceptions=False)
    r = c.get("/nf")
    assert r.status_code == 404
    assert r.json() == {"error": {"code": "not_found", "message": "page 'a.md' not found"}}
    r = c.get("/pre")
    assert r.status_code == 412
    assert r.json() == {"error": {"code": "precondition_failed", "message": "stale write", "data": {"current_page_id": 7}}}
    r = c.get("/busy")
    assert r.status_code == 429 and r.headers["retry-after"] == "3"
    r = c.get("/boom")
    assert r.status_code == 500
    assert r.json() == {"error": {"code": "internal", "message": "internal server error"}}
    r = c.get("/typed", params={"n": "x"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "bad_request"
    r = c.get("/missing")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize(
    "err",
    [errors.NotFoundError("x"), errors.PreconditionFailedError("y", data={"current_page_id": 3}), errors.BusTimeoutError("z")],
)
def test_roundtrip_through_reply_dict(err: errors.AimemError) -> None:
    back = errors.from_dict(err.to_dict())
    assert type(back) is type(err)
    assert back.message == err.message and back.data == err.data and back.status == err.status


def test_unknown_code_keeps_code() -> None:
    e = errors.from_dict({"code": "unsanitized", "message": "secret found", "data": {"status": 422}})
    assert e.code == "unsanitized" and e.status == 422
