"""The one MCP error mapper: typed aimem errors → JSON-RPC codes and data."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from aimem_common import errors as e
from aimem_mcp.errors import AUTH_ERROR, TIMEOUT_ERROR, UNAVAILABLE_ERROR, invalid_params, to_mcp_error


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (e.BadRequestError("x", code="invalid_name"), -32602),
        (e.NotFoundError("x", code="project_not_found"), -32602),
        (e.PayloadTooLargeError("x"), -32602),
        (e.PreconditionFailedError("x", data={"current_page_id": 7}), -32600),
        (e.ConflictError("x"), -32600),
        (e.ForbiddenError("x"), AUTH_ERROR),
        (e.UnauthorizedError("x"), AUTH_ERROR),
        (e.BusTimeoutError("x"), TIMEOUT_ERROR),
        (e.UnavailableError("x", code="maintainer_unavailable"), UNAVAILABLE_ERROR),
        (e.BackPressureError("x"), UNAVAILABLE_ERROR),
        (e.from_dict({"code": "llm_not_configured", "message": "x", "data": {"status": 503}}), UNAVAILABLE_ERROR),
        (e.AimemError("boom"), -32603),
    ],
)
def test_codes(exc, code):
    err = to_mcp_error(exc)
    assert err.code == code
    assert err.data["code"] == exc.code
    assert err.message == exc.message


def test_precondition_failed_data():
    err = to_mcp_error(e.PreconditionFailedError("stale", data={"path": "a.md", "expected_page_id": 1, "current_page_id": 2}))
    assert err.data == {"code": "precondition_failed", "reason": "precondition_failed", "path": "a.md",
                        "expected_page_id": 1, "current_page_id": 2}


def test_invalid_params_names_fields_without_values():
    class M(BaseModel):
        model_config = ConfigDict(extra="forbid")
        limit: int

    with pytest.raises(ValidationError) as info:
        M.model_validate({"limit": "secret-value", "zzz": 1})
    err = invalid_params(info.value, "memory_x")
    assert err.code == -32602
    assert err.data["fields"] == ["limit", "zzz"]
    assert "secret-value" not in err.message and "zzz: unknown argument" in err.message
