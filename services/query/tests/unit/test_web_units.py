"""Web interface pieces without a server: inert markdown, the login limiter, redirects,
CSRF tokens, password hashes, the decay view."""

from __future__ import annotations

import pytest

from aimem_common.config import DecaySettings
from aimem_common.errors import BackPressureError
from aimem_query.web import session
from aimem_query.web.login import safe_next
from aimem_query.web.pages import decay_state
from aimem_query.web.passwords import hash_password, verify_password
from aimem_query.web.render import Renderer


@pytest.fixture(scope="module")
def r() -> Renderer:
    return Renderer()


def test_markdown_is_inert(r):
    html = r.markdown("# T\n<script>alert(1)</script>\n<img src=x onerror=alert(2)>\n[a](javascript:alert(3))\n"
                      "[b](JaVaScRiPt:alert(4)) [c](vbscript:x) [d](data:text/html,<b>) ![e](http://evil/p.png)\n"
                      "<a href=\"x\" onclick=\"alert(5)\">f</a>", workspace="w", project="p", resolved={})
    assert "<script" not in html and "&lt;script&gt;" in html
    assert "<img" not in html and "onerror" in html  # as text only
    assert 'href="javascript' not in html.lower() and 'href="vbscript' not in html and 'href="data' not in html
    assert '<a href="http://evil/p.png" rel="noopener noreferrer nofollow" class="image-link">' in html
    assert "<a href=\"x\"" not in html
    assert html.startswith("<h2>T</h2>")  # the screen's h1 is the page title


def test_wikilinks_resolve_to_page_screens(r):
    html = r.markdown("See [[decisions/keep-id]], [[infra:runbooks/nats.md|the runbook]] and [[gone]].\n"
                      "`[[in code]]`", workspace="default", project="app",
                      resolved={("default", "app", "decisions/keep-id.md"): True,
                                ("default", "infra", "runbooks/nats.md"): True})
    assert '<a href="/web/p/default/app/page/decisions/keep-id.md" class="wikilink">decisions/keep-id</a>' in html
    assert '<a href="/web/p/default/infra/page/runbooks/nats.md" class="wikilink">the runbook</a>' in html
    assert 'href="/web/p/default/app/page/gone.md" class="wikilink missing"' in html
    assert "<code>[[in code]]</code>" in html


def test_limiter_blocks_after_max_failures_for_the_window():
    now = [1000.0]
    lim = session.LoginLimiter(300, clock=lambda: now[0])
    keys = [("user", "ann", 3)]
    for _ in range(3):
        lim.check(keys)
        lim.fail(keys)
    with pytest.raises(BackPressureError) as err:
        lim.check(keys)
    assert 290 <= err.value.retry_after_s <= 301
    lim.check([("user", "bob", 3)])  # other names are not affected
    now[0] += 301
    lim.check(keys)  # the window slid past the failures
    lim.fail(keys)
    lim.reset(keys)
    lim.check(keys)


def test_next_redirect_stays_on_web():
    assert safe_next("/web/p/default/app") == "/web/p/default/app"
    for bad in ("//evil.example/web/", "https://evil.example/", "/webevil", "/web\\..\\x", None, ""):
        assert safe_next(bad) == "/web/"


def test_csrf_is_bound_to_its_secret_and_passwords_verify():
    assert session.csrf_for("a") == session.csrf_for("a") != session.csrf_for("b")
    encoded = hash_password("correct horse")
    assert encoded.startswith("$argon2id$v=19$")
    assert verify_password(encoded, "correct horse") and not verify_password(encoded, "wrong")
    assert not verify_password(None, "anything")


def test_decay_view_follows_the_sweep_rules():
    d = DecaySettings()
    base = {"pinned": False, "path": "sessions/s.md", "tier": "episodic", "salience": None, "access_count": 0,
            "updated_at": "2000-01-01T00:00:00Z", "last_accessed_at": None}
    old = decay_state(base, d)
    assert old["decays"] and old["cold"] and old["retention"] < d.cold_threshold
    assert decay_state({**base, "pinned": True}, d) == {"decays": False, "why": "pinned", "salience": 1.0}
    assert not decay_state({**base, "tier": "semantic"}, d)["decays"]


def test_a_dict_field_reads_as_jinja2_reads_it(r):
    """The renderer looks ``row.field`` of a dict up as a key first (fast), with Jinja2's answers:
    a dict method still wins over a key of its name, a missing key is undefined, and
    untrusted text stays escaped."""
    from jinja2 import Environment

    row = {"title": "<b>T</b>", "items": "not the method", "n": 0}
    src = "{{ row.title }}|{{ row.n }}|{{ row.missing }}|{{ row.items is callable }}|{{ row.get('n') }}|{{ obj.real }}"
    plain = Environment(autoescape=True)
    ours = r.env.from_string(src).render(row=row, obj=3)
    assert ours == plain.from_string(src).render(row=row, obj=3)
    assert ours == "&lt;b&gt;T&lt;/b&gt;|0||True|0|3"
