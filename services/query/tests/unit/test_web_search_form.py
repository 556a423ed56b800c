"""The web search form is made from ``SearchParams``: an input for every field (on a project's
screen the workspace and project are the URL's), under the model's names, bounds and help."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from pydantic import Field

from aimem_common.search.params import SearchParams, param_specs
from aimem_query.web import search
from aimem_query.web.render import Renderer


class _Inputs(HTMLParser):
    """The inputs of ``form.search`` (name -> attributes) and the text of their help."""

    def __init__(self) -> None:
        super().__init__()
        self.inputs: dict[str, dict[str, str | None]] = {}
        self.in_form = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form" and "search" in (a.get("class") or ""):
            self.in_form = True
        elif tag == "input" and self.in_form and a.get("name"):
            self.inputs[a["name"]] = a

    def handle_endtag(self, tag):
        if tag == "form":
            self.in_form = False


def form_inputs(html: str) -> dict[str, dict[str, str | None]]:
    parser = _Inputs()
    parser.feed(html)
    return parser.inputs


def render(params, values=None, scope=None) -> str:
    return Renderer().env.get_template("search.html").render(
        params=params, main_params=search.MAIN_PARAMS, values=values or {}, scope=scope, result=None, error=None,
        explain=False, user=None, csrf="c", here="/web/search", query="")


def test_every_search_parameter_is_an_input_of_the_same_name():
    specs = {s.name: s for s in param_specs()}
    everywhere = form_inputs(render(search.form_params(project_screen=False)))
    assert set(everywhere) == set(specs)
    on_a_project = form_inputs(render(search.form_params(project_screen=True),
                                      scope={"workspace": "default", "project": "app"}))
    assert set(on_a_project) | set(search.PATH_PARAMS) == set(specs)
    assert set(search.PATH_PARAMS) <= {"workspace", "project"}
    limit, query, scopes = everywhere["limit"], everywhere["query"], everywhere["scopes"]
    assert (limit["type"], limit["min"], limit.get("max")) == ("number", str(specs["limit"].minimum), None)
    assert (query["type"], query["maxlength"]) == ("search", str(specs["query"].max_length))
    assert scopes["type"] == "text"
    for name in ("global", "explain", "include_expired", "include_superseded"):
        assert everywhere[name]["type"] == "checkbox" and everywhere[name]["value"] == "true"


def test_the_help_is_the_model_s_and_stays_inert():
    html = render(search.form_params(project_screen=False))
    assert "Also return pages past their <code>expires_at</code> TTL." in html  # `code` spans
    assert "Aliases" not in html  # the JSON aliases are the API's, not the form's
    hostile = [s for s in param_specs() if s.name == "query"][0]
    html = render([hostile], values={"query": '"><script>alert(1)</script>'})
    assert "<script>alert(1)" not in html and "&lt;script&gt;" in html


def test_a_new_search_parameter_becomes_an_input_by_itself():
    class Wider(SearchParams):
        include_drafts: bool = Field(False, description="Also return drafts.")
        max_age_days: int | None = Field(None, ge=1, le=3650, description="Only pages younger than this.")

    inputs = form_inputs(render(list(param_specs(Wider))))
    assert inputs["include_drafts"]["type"] == "checkbox"
    assert (inputs["max_age_days"]["min"], inputs["max_age_days"]["max"]) == ("1", "3650")


def test_submitted_values_fill_the_form_again():
    html = render(search.form_params(project_screen=False),
                  values={"query": "retry", "limit": "3", "scopes": ["infra", "ops"], "include_expired": "true"})
    inputs = form_inputs(html)
    assert (inputs["query"]["value"], inputs["limit"]["value"], inputs["scopes"]["value"]) == ("retry", "3",
                                                                                              "infra, ops")
    assert "checked" in inputs["include_expired"] and "checked" not in inputs["explain"]
    assert "<details open>" in html  # an option under "More options" was used


@pytest.mark.parametrize(("query", "expected"), [
    ("q=retry&explain=true", {"query": "retry", "explain": "true"}),
    ("query=a&scopes=x,y&scopes=z&limit=&global=true", {"query": "a", "scopes": ["x,y", "z"], "global": "true"}),
    ("search=b&include_superseded=true&unknown=1", {"query": "b", "include_superseded": "true"}),
])
def test_the_form_reads_back_by_the_model_s_names(query, expected):
    from starlette.requests import Request

    request = Request({"type": "http", "method": "GET", "path": "/web/search", "query_string": query.encode(),
                       "headers": []})
    values = search.read_form(request)
    assert values == expected
    SearchParams.model_validate(values)  # what the form sends, the model takes


@pytest.mark.parametrize("given, expected", [(None, True), ("false", False), ("true", True), ("maybe", "error")])
def test_the_all_projects_screen_validates_a_submitted_global_value(given, expected):
    from pydantic import ValidationError

    from aimem_common.search.params import SearchQuery

    submitted = {"query": "retry"} | ({"global": given} if given is not None else {})
    values = search.search_values(submitted, None, None)
    if expected == "error":
        with pytest.raises(ValidationError, match="global"):
            SearchQuery.model_validate(values)
    else:
        assert SearchQuery.model_validate(values).global_ is expected
