"""``aimem search`` offers every ``SearchParams`` field under its own name, with the model's
bounds, default and help, and sends what it was given as that model (``POST /api/v1/search``)."""

from __future__ import annotations

import json

import pytest
import typer
from pydantic import Field
from typer.testing import CliRunner

from aimem_cli.main import build_app
from aimem_common.search.params import ParamSpec, SearchParams, param_specs


def search_command():
    return typer.main.get_command(build_app()).commands["search"]


def mismatches(command, specs: tuple[ParamSpec, ...]) -> list[str]:
    """What ``command`` offers differently from ``specs``: a field missing, spelled otherwise
    (its flag ``--<name>``, its parameter the model's attribute), or with other help, bounds or
    default."""
    params = {p.name: p for p in command.params}
    out = []
    for spec in specs:
        p = params.get(spec.field)
        if p is None:
            out.append(f"{spec.name}: not offered")
            continue
        if spec.name == "query":
            if p.param_type_name != "argument" or p.required is not True:
                out.append("query: not the required argument")
            continue
        flag = "--" + spec.name.replace("_", "-")
        if flag not in p.opts:
            out.append(f"{spec.name}: flag {p.opts}, not {flag}")
        if not (p.help or "").startswith(spec.help):
            out.append(f"{spec.name}: help {p.help!r}")
        if spec.kind == "count" and (p.min, p.max) != (spec.minimum, spec.maximum):
            out.append(f"{spec.name}: bounds {p.min}..{p.max}")
        if spec.kind == "flag" and (not p.is_flag or p.default != spec.default):
            out.append(f"{spec.name}: not a flag defaulting to {spec.default}")
        if spec.kind != "flag" and p.default not in (None, []):
            out.append(f"{spec.name}: default {p.default!r} (the server's: None)")
    return out


def test_every_search_parameter_is_a_flag_of_the_same_name():
    assert mismatches(search_command(), param_specs()) == []


def test_a_new_search_parameter_the_cli_lacks_fails():
    class Wider(SearchParams):
        include_drafts: bool = Field(False, description="Also return drafts.")

    assert mismatches(search_command(), param_specs(Wider)) == ["include_drafts: not offered"]


def test_a_field_of_a_type_no_flag_offers_is_refused():
    class Odd(SearchParams):
        weights: dict[str, float] = Field(default_factory=dict, description="Per-stream weights.")

    with pytest.raises(TypeError, match="weights"):
        param_specs(Odd)


@pytest.fixture
def recorder(tmp_path, monkeypatch, ingress_factory):
    """A loopback HTTP server that records what the CLI sends (and answers 200)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AIMEM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("AIMEM_AUTH__TOKEN", raising=False)
    with ingress_factory(status=200) as server:
        yield server


def run(server, *args: str):
    return CliRunner().invoke(build_app(), ["search", *args, "--server", server.url, "--token", "t", "--json"])


def test_the_flags_travel_as_the_search_model(recorder):
    r = run(recorder, "retry policy", "--global", "--scopes", "infra,ops", "--scopes", "docs", "--limit", "3",
            "--include-expired", "--explain")
    assert r.exit_code == 0, r.output
    (req,) = recorder.requests
    assert req["path"] == "/api/v1/search"
    assert json.loads(req["body"]) == {"query": "retry policy", "limit": 3, "scopes": ["infra", "ops", "docs"],
                                       "global": True, "explain": True, "include_expired": True}


def test_a_project_search_names_its_scope_and_leaves_the_limit_to_the_server(recorder):
    r = run(recorder, "keep the id", "-w", "team", "-p", "app", "--include-superseded")
    assert r.exit_code == 0, r.output
    assert json.loads(recorder.requests[0]["body"]) == {"query": "keep the id", "workspace": "team", "project": "app",
                                                        "include_superseded": True}


def test_the_old_all_flag_still_searches_everything(recorder):
    assert run(recorder, "x", "--all").exit_code == 0
    assert json.loads(recorder.requests[0]["body"]) == {"query": "x", "global": True}


def test_bad_values_are_one_line_before_anything_is_sent(recorder):
    r = run(recorder, "x", "--global", "--limit", "0")
    assert r.exit_code == 2 and "--limit" in r.output  # the model's bound, enforced by the flag
    r = run(recorder, "x", "--global", "--project", "p" * 500)
    assert r.exit_code == 1 and r.output.count("\n") == 1 and r.output.startswith("aimem: project:")
    r = run(recorder, "x" * (16 * 1024 + 1), "--global")
    assert r.exit_code == 1 and r.output.startswith("aimem: query:")
    assert recorder.requests == []
