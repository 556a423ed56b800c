"""HTML out: Jinja2 templates (autoescaped), inert markdown, and the security headers.

Everything shown comes from agents and hooks and is untrusted. Markdown is rendered by
markdown-it-py with raw HTML **off** (``<script>`` and ``onerror=`` arrive as text) and its
link validator on (``javascript:``, ``vbscript:``, ``file:`` and most ``data:`` URLs are not
made into links); images from other hosts become links (no request leaves the page);
``[[wikilinks]]`` become links to the page screen. Every response carries
a strict Content-Security-Policy: scripts and styles only from ``/web/static`` (no inline
script, no ``eval``), images from this origin only, no frames, forms only to this origin.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.rules_inline import StateInline

from aimem_common.wikifmt import WIKILINK_RE, LinkTarget, parse_wikilink
from aimem_query.web import session

TEMPLATES = Path(__file__).parent / "templates"

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self';"
       " form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


@lru_cache(maxsize=256)
def _project_base(workspace: str, project: str) -> str:
    return f"/web/p/{quote(workspace, safe='')}/{quote(project, safe='')}"


def page_url(workspace: str, project: str, path: str = "", screen: str = "page") -> str:
    """Return ``/web/p/<ws>/<project>/<screen>/<path>`` with every part percent-encoded."""
    base = _project_base(workspace, project)
    if not screen:
        return base
    return f"{base}/{screen}" + (f"/{quote(path, safe='/')}" if path else "")


def _wikilink_rule(state: StateInline, silent: bool) -> bool:
    """markdown-it inline rule: ``[[target|label]]`` → a link resolved by ``env["wikilink"]``."""
    if not state.src.startswith("[[", state.pos):
        return False
    m = WIKILINK_RE.match(state.src, state.pos)
    if m is None:
        return False
    link = parse_wikilink(m.group(1), m.group(2))
    resolve: Callable[[LinkTarget], tuple[str, bool]] | None = state.env.get("wikilink")
    if link is None or resolve is None:
        return False
    if not silent:
        href, exists = resolve(link)
        tok = state.push("link_open", "a", 1)
        tok.attrs = {"href": href, "class": "wikilink" if exists else "wikilink missing"}
        if not exists:
            tok.attrs["title"] = "no such page yet"
        text = state.push("text", "", 0)
        text.content = link.label or m.group(1).strip()
        state.push("link_close", "a", -1)
    state.pos = m.end()
    return True


def _external_links(self, tokens, idx, options, env) -> str:
    """Mark links that leave aimem (``rel=noopener noreferrer nofollow``)."""
    href = tokens[idx].attrGet("href") or ""
    if "://" in href or href.startswith("//"):
        tokens[idx].attrSet("rel", "noopener noreferrer nofollow")
    return self.renderToken(tokens, idx, options, env)


def _images(self, tokens, idx, options, env) -> str:
    """Show an image from elsewhere as a link: a page must not make the browser fetch from
    other hosts (tracking pixels, leaks); the CSP would block it too."""
    tok = tokens[idx]
    src = tok.attrGet("src") or ""
    alt = self.renderInlineAsText(tok.children or [], options, env)
    if src.lower().startswith("data:"):
        return f"[image: {escapeHtml(alt or 'inline data')}]"
    if "://" in src or src.startswith("//"):
        return (f'<a href="{escapeHtml(src)}" rel="noopener noreferrer nofollow" class="image-link">'
                f"[image: {escapeHtml(alt or src)}]</a>")
    return self.image(tokens, idx, options, env)


def _shift_headings(state) -> None:
    """Core rule: ``#`` → ``<h2>`` … (the screen's own ``<h1>`` is the page title)."""
    for tok in state.tokens:
        if tok.type in ("heading_open", "heading_close"):
            tok.tag = f"h{min(6, int(tok.tag[1]) + 1)}"


def make_markdown() -> MarkdownIt:
    """Return the markdown renderer: CommonMark + tables + strikethrough, raw HTML off,
    headings one level down."""
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.inline.ruler.before("link", "wikilink", _wikilink_rule)
    md.core.ruler.push("shift_headings", _shift_headings)
    md.add_render_rule("link_open", _external_links)
    md.add_render_rule("image", _images)
    return md


_DICT_ATTRIBUTES = frozenset(dir(dict))


class _Environment(Environment):
    """Jinja2 with a fast ``row.field`` on a dict.

    Jinja2 tries ``getattr`` first, and on a dict that raises ``AttributeError`` before the
    key is looked up: on a screen of 500 rows that exception was a third of the render time.
    A name that is not a dict attribute gives the same answer looked up as a key first
    (``items``, ``keys``, ``get``... keep Jinja2's order: the method wins, as before).
    """

    def getattr(self, obj: Any, attribute: str) -> Any:
        if type(obj) is dict and attribute not in _DICT_ATTRIBUTES:
            try:
                return obj[attribute]
            except KeyError:
                return self.undefined(obj=obj, name=attribute)
        return super().getattr(obj, attribute)


# Terminal escape sequences (colours, cursor moves, titles) that agents' command output carries:
# a browser shows the ESC character as a box and the rest as noise. CSI, OSC (ended by BEL or
# ST), two-character escapes, then any other control character but tab and newline.
_ANSI_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]|\x9b[0-?]*[ -/]*[@-~]"
                      r"|[\x00-\x08\x0b-\x1f\x7f]")


def human_bytes(n: Any) -> str:
    """``1536`` → ``"1.5 KiB"`` (binary units, one decimal from KiB on); ``None`` → ``"unknown"``."""
    if not isinstance(n, (int, float)):
        return "unknown"
    size, unit = float(n), "bytes"
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            break
        size /= 1024
    return f"{int(size)} bytes" if unit == "bytes" else f"{size:.1f} {unit}"


def strip_ansi(text: str) -> str:
    """``text`` without terminal escape sequences and control characters (display only: the
    stored text keeps them), carriage returns included (``\r\n`` stays a line break)."""
    return _ANSI_RE.sub("", text) if _NEEDS_STRIP.search(text) else text


# what ``strip_ansi`` removes starts with one of these (ESC and CSI included; tab and line feed
# are kept): one C-level scan per printed string, which a 300-node graph prints thousands of
_NEEDS_STRIP = re.compile("[\x00-\x08\x0b-\x1f\x7f\x9b]")


def display(value: Any) -> Any:
    """Jinja ``finalize``: every string a template prints goes through ``strip_ansi`` (already
    rendered HTML, ``Markup``, is left alone: its text was stripped before rendering)."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return strip_ansi(value)
    return value


class Renderer:
    """Templates + markdown for one app (built once in ``install``)."""

    def __init__(self) -> None:
        self.env = _Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(default=True),
                               trim_blocks=True, lstrip_blocks=True, finalize=display)
        self.env.globals.update(page_url=page_url, quote=quote)
        self.env.filters["tojson_pretty"] = lambda v: json.dumps(v, indent=2, ensure_ascii=False, default=str)
        self.env.filters["short"] = lambda t: (t or "")[:19].replace("T", " ")
        self.env.filters["bytes"] = human_bytes
        self.md = make_markdown()

    def markdown(self, text: str, *, workspace: str, project: str, resolved: dict[tuple, bool]) -> str:
        """Render untrusted markdown to inert HTML; wikilinks point at their page screen.

        ``resolved`` maps ``(workspace, project, path)`` of the page's indexed links to
        whether the target exists (unknown targets are shown as missing).
        """
        def wikilink(link: LinkTarget) -> tuple[str, bool]:
            ws, pj = link.workspace or workspace, link.project or project
            return page_url(ws, pj, link.path), resolved.get((ws, pj, link.path), False)

        return self.md.render(strip_ansi(text), {"wikilink": wikilink})

    def page(self, request: Request, template: str, *, http_status: int = 200, user: Any = None,
             headers: dict[str, str] | None = None, **ctx: Any) -> HTMLResponse:
        """Render ``template`` with ``ctx`` (+ ``user``, ``csrf``, ``path``) as a secured response."""
        if user is None:
            user = getattr(request.state, "web_user", None)
        csrf = user.csrf if user is not None else session.csrf_for(session.pre_secret(request))
        html = self.env.get_template(template).render(
            user=user, csrf=csrf, here=request.url.path, query=request.url.query, **ctx
        )
        resp = HTMLResponse(html, status_code=http_status, headers={**SECURITY_HEADERS, **(headers or {})})
        session.set_pre_cookie(request, resp)
        return resp
