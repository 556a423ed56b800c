"""``SearchParams``: the one search request every interface takes (names, aliases, bounds)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from aimem_common.search.params import MAX_SCOPES, SearchParams, SearchQuery


def test_the_question_has_one_name_and_the_aliases_agents_and_urls_use() -> None:
    for key in ("query", "q", "search"):
        assert SearchParams.model_validate({key: "retry policy", "project": "app"}).query == "retry policy"
    assert SearchParams().query == ""  # an empty question finds nothing; MCP requires one


def test_scopes_split_commas_drop_blanks_and_accept_null() -> None:
    assert SearchParams(scopes=["a, b", "default/c", " "]).scopes == ["a", "b", "default/c"]
    assert SearchParams.model_validate({"scopes": "a,b"}).scopes == ["a", "b"]
    assert SearchParams.model_validate({"scopes": None}).scopes == []
    with pytest.raises(ValidationError):
        SearchParams.model_validate({"scopes": [1]})


def test_a_limit_is_any_positive_integer_the_search_clamps_it() -> None:
    # ``query.max_limit`` clamps (the service), so a big limit is not refused here.
    assert SearchParams(limit=1000).limit == 1000
    assert SearchQuery.model_validate({"q": "x", "limit": "1000"}).limit == 1000  # the query string's text
    for bad in (0, -1, "0", "ten", 2.5, True, False, "true"):
        with pytest.raises(ValidationError):
            SearchParams.model_validate({"limit": bad})  # a boolean is not a count


def test_bounds_are_the_shared_ones() -> None:
    with pytest.raises(ValidationError):
        SearchParams(workspace="w" * 129)
    with pytest.raises(ValidationError):
        SearchParams(scopes=[f"p{i}" for i in range(MAX_SCOPES + 1)])
    assert SearchParams.model_validate({"top_k": 3, "global": True}).limit == 3


def test_the_body_refuses_unknown_fields_the_query_string_ignores_them() -> None:
    with pytest.raises(ValidationError):
        SearchParams.model_validate({"q": "x", "querry": "typo"})
    assert SearchQuery.model_validate({"q": "x", "_": "1700000000"}).query == "x"
