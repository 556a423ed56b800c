"""``decode_json``: orjson first, the standard library for what orjson refuses (same verdicts)."""

from __future__ import annotations

import pytest

from aimem_common.errors import BadRequestError
from aimem_ingress.body import decode_json


def test_values_orjson_refuses_still_decode() -> None:
    # JSON (and Python's json) allow these; orjson alone would turn them into a 400.
    assert decode_json(b'{"n": 123456789012345678901234567890}', max_depth=8) == {"n": 123456789012345678901234567890}
    assert decode_json(b'{"s": "\\ud800"}', max_depth=8) == {"s": "\ufffd"}  # lone surrogate: U+FFFD
    assert decode_json(b'{"x": NaN}', max_depth=8)["x"] != 0


@pytest.mark.parametrize(("raw", "code"), [
    (b'{"a": "\xff"}', "invalid_utf8"),
    (b'{"a": ', "invalid_json"),
    (b"   ", "empty_body"),
    (b'{"a": ' + b"[" * 10 + b"]" * 10 + b"}", "too_deep"),
])
def test_refusals_keep_their_codes(raw: bytes, code: str) -> None:
    with pytest.raises(BadRequestError) as exc:
        decode_json(raw, max_depth=8)
    assert exc.value.code == code


def test_fast_path_result_equals_the_standard_library() -> None:
    import json

    raw = '{"session_id": "s", "tool_input": {"command": "ls é 漢字"}, "n": [1, 2.5, true, null]}'.encode()
    assert decode_json(raw, max_depth=8) == json.loads(raw)
