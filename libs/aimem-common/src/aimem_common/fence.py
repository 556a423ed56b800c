"""The injection fence: memory text handed to an agent can never end it or speak as a role.

Everything aimem injects into an agent's prompt (session-start context, briefing, handoff
accept, explore, a popped message) is wrapped by ``fence(text, **attrs)`` in one
``<aimem-memory source="aimem" trust="untrusted-historical-data" …>`` … ``</aimem-memory>``
block. Stored text comes from agents and imports, so it is untrusted: ``neutralise(text)``
defuses every tag in it that could close or re-open the fence or pose as a chat role.

**What counts as a tag.** Detection runs on a *normalised view* of the text, built one
character at a time: compatibility decomposition (NFKD, the decomposing half of NFKC, so
``＜／ａｉｍｅｍ－ｍｅｍｏｒｙ＞`` and ``﹤system﹥`` read as ASCII and ``≮`` as ``<``), look-alikes
read as their ASCII twin (``LOOKALIKES``: ``‹ « 〈 ⟨`` as ``<``, dotless ``ı`` as ``i``, Cyrillic
``а`` and Greek ``Ο`` as ``a`` and ``o``, …), case folding, then removal of whitespace, control (Cc) and format (Cf: zero-width space and
joiners, BOM, soft hyphen, bidi controls, tag characters) characters, combining marks (Mn,
Me), dashes (Pd, ``_``), private-use, unassigned and surrogate code points and blank
letters (Hangul fillers, the braille blank). A tag is ``<``, any of ``/ \\ | !``, then a name of ``TAG_NAMES``; a closing
``>`` is not needed (a clipped ``</aimem-memory`` still counts). Names in
``PREFIX_NAMES`` (aimem's own fence namespaces) match as a prefix (``<aimem…``,
``<untrusted…``); the role-like names match as whole words (``<user>``, ``< / System >``,
``<|im_start|>``, ``<system prompt="x">`` but not ``<username>``, ``<systemd>``,
``<sys/types.h>`` or the arrow in ``x <- model``).

**What is changed.** Only the ``<`` (or its look-alike) of each matched tag, in the
*original* text, becomes ``[`` (no angle, nothing folds it back to ``<``); every other
character is kept, so the text stays readable ("[/system>") and keeps its length. The result has no tag
left, so ``neutralise`` is idempotent. Pure functions, any thread; linear in the text.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

__all__ = [
    "CLOSE_TAG", "FENCE_NAME", "LOOKALIKES", "OPENERS", "PREFIX_NAMES", "ROLE_NAMES", "SUBSTITUTE", "TAG_NAMES", "TagHit",
    "fence", "fence_counts", "find_tags", "neutralise", "neutralise_data", "open_tag", "unfence",
]

FENCE_NAME = "aimem-memory"
CLOSE_TAG = f"</{FENCE_NAME}>"
SUBSTITUTE = "["  # readable ("[/system>"), no angle, never folds to "<"
DEFAULT_ATTRS: dict[str, str] = {"source": "aimem", "trust": "untrusted-historical-data"}

# Names in the normalised view (lower case, no dashes or underscores).
# aimem's own fences: <aimem-memory> (this module), <untrusted-data> (the maintainer's LLM
# prompts), <untrusted-message> (messages before this module); any tag in those namespaces.
PREFIX_NAMES: tuple[str, ...] = ("aimem", "untrusted")
# Chat roles and prompt-structure tags that models are trained to obey, as whole words:
# role tags (OpenAI/Anthropic/Gemini role names), Claude Code's <system-reminder>,
# instruction blocks, tool-call/-result blocks, and the special tokens of common chat
# templates (ChatML <|im_start|>, Llama 3 <|start_header_id|>/<|eot_id|>, Llama 2 <<SYS>>,
# Gemma <start_of_turn>, GPT <|endoftext|>).
ROLE_NAMES: tuple[str, ...] = (
    "system", "systemprompt", "systemmessage", "systemreminder", "sys",
    "user", "usermessage", "human", "assistant", "ai", "model", "developer",
    "instructions", "instruction", "inst",
    "tool", "toolcall", "toolcalls", "tooluse", "toolresult", "toolresults", "toolresponse",
    "function", "functions", "functioncall", "functioncalls", "functionresult", "functionresults",
    "imstart", "imend", "imsep", "endoftext", "eotid", "startheaderid", "endheaderid",
    "beginoftext", "startofturn", "endofturn",
)
TAG_NAMES: tuple[str, ...] = PREFIX_NAMES + ROLE_NAMES

# Dropped from the view: controls, format chars, combining marks, dashes, separators,
# private-use, unassigned and surrogate code points, and the letters that render blank
# (Hangul fillers, the braille blank) so an invisible character cannot split a name.
_DROP_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cn", "Cs", "Mn", "Me", "Pd", "Zs", "Zl", "Zp"})
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
_TAG_RE = re.compile(
    r"<(?P<slash>[/\\|!]*)(?P<name>" + "|".join(sorted(TAG_NAMES, key=len, reverse=True)) + ")"
)
# Look-alikes no compatibility normalisation maps to their ASCII twin, read as that twin
# (applied to single characters before and after case folding, so capitals are listed too):
# angle quotes and brackets for "<" ">", slash-like signs, dotless and small-capital Latin
# letters, and the Cyrillic and Greek letters drawn like Latin ones. A model reads
# "‹/аimem-memory›" (Cyrillic а) or "</AIMEM-MEMΟRY>" (Greek Ο) as the fence's end.
_ANGLES_LEFT = "\u2039\u00ab\u3008\u2329\u27e8\u27ea\u300a\u276c\u276e\u29fc\u02c2\u1438\u2991\u2770"
_ANGLES_RIGHT = "\u203a\u00bb\u3009\u232a\u27e9\u27eb\u300b\u276d\u276f\u29fd\u02c3\u1433\u2992\u2771"
LOOKALIKES: dict[str, str] = {
    **dict.fromkeys(_ANGLES_LEFT, "<"),  # ‹ « 〈 〈 ⟨ ⟪ 《 ❬ ❮ ⧼ ˂ ᐸ ⦑ ❰
    **dict.fromkeys(_ANGLES_RIGHT, ">"),  # › » 〉 〉 ⟩ ⟫ 》 ❭ ❯ ⧽ ˃ ᐳ ⦒ ❱
    **dict.fromkeys("\u2044\u2215\u29f8\u2571", "/"),  # ⁄ ∕ ⧸ ╱
    **dict.fromkeys("\u29f9\u2572", "\\"),  # ⧹ ╲
    # Latin: dotless i, iota, small capitals, script a/g, dotless j
    "\u0131": "i", "\u0269": "i", "\u026a": "i", "\u0251": "a", "\u0261": "g", "\u0237": "j",
    "\u1d00": "a", "\u0299": "b", "\u1d04": "c", "\u1d05": "d", "\u1d07": "e", "\u0262": "g", "\u029c": "h",
    "\u1d0a": "j", "\u1d0b": "k", "\u029f": "l", "\u1d0d": "m", "\u0274": "n", "\u1d0f": "o", "\u1d18": "p",
    "\u0280": "r", "\ua731": "s", "\u1d1b": "t", "\u1d1c": "u", "\u1d20": "v", "\u1d21": "w", "\u028f": "y",
    "\u1d22": "z",
    # Cyrillic capitals А В Е К М Н О Р С Т У Х Ѕ І Ј Ԁ Һ Ӏ, small а е о р с у х ѕ і ј ԁ һ ӏ ԛ ԝ ѵ
    "\u0410": "a", "\u0412": "b", "\u0415": "e", "\u041a": "k", "\u041c": "m", "\u041d": "h", "\u041e": "o",
    "\u0420": "p", "\u0421": "c", "\u0422": "t", "\u0423": "y", "\u0425": "x", "\u0405": "s", "\u0406": "i",
    "\u0408": "j", "\u0500": "d", "\u04ba": "h", "\u04c0": "l",
    "\u0430": "a", "\u0435": "e", "\u043e": "o", "\u0440": "p", "\u0441": "c", "\u0443": "y", "\u0445": "x",
    "\u0455": "s", "\u0456": "i", "\u0458": "j", "\u0501": "d", "\u04bb": "h", "\u04cf": "l", "\u051b": "q",
    "\u051d": "w", "\u0475": "v",
    # Greek capitals Α Β Ε Ζ Η Ι Κ Μ Ν Ο Ρ Τ Υ Χ, small α ε η ι κ ν ο ρ τ υ χ
    "\u0391": "a", "\u0392": "b", "\u0395": "e", "\u0396": "z", "\u0397": "h", "\u0399": "i", "\u039a": "k",
    "\u039c": "m", "\u039d": "n", "\u039f": "o", "\u03a1": "p", "\u03a4": "t", "\u03a5": "y", "\u03a7": "x",
    "\u03b1": "a", "\u03b5": "e", "\u03b7": "n", "\u03b9": "i", "\u03ba": "k", "\u03bd": "v", "\u03bf": "o",
    "\u03c1": "p", "\u03c4": "t", "\u03c5": "u", "\u03c7": "x",
}
# Every character whose folding yields "<" (a unit test checks all of Unicode): text
# without any of them has no tag and is returned as is without building the view.
OPENERS = "<\u226e\ufe64\uff1c\ufe3d\ufe3f" + _ANGLES_LEFT  # < ≮ ﹤ ＜ ︽ ︿ and the look-alikes above
_OPENER_RE = re.compile("[" + OPENERS + "]")


@dataclass(frozen=True, slots=True)
class TagHit:
    """One tag found in a text: where its ``<`` is in the original text, its name, its kind.

    ``start`` indexes the original string; ``name`` is the normalised name matched
    (one of ``PREFIX_NAMES`` for a fence-namespace tag, else the role name); ``closing`` is true for
    ``</…>`` (or ``<\\…>``).
    """

    start: int
    name: str
    closing: bool


@lru_cache(maxsize=4096)
def _fold(ch: str) -> str:
    """Return the normalised view of one character (``""`` when it is dropped).

    NFKD, look-alikes (``LOOKALIKES``, before case folding so ``Η`` reads ``h`` and ``η`` ``n``),
    case folding, NFKD again, look-alikes again, then the dropped categories are removed.
    """
    first = "".join(LOOKALIKES.get(d, d) for d in unicodedata.normalize("NFKD", ch))
    out = []
    for d in unicodedata.normalize("NFKD", first.casefold()):
        d = LOOKALIKES.get(d, d)
        if d == "_" or d in _BLANK_LETTERS or d.isspace() or unicodedata.category(d) in _DROP_CATEGORIES:
            continue
        out.append(d)
    return "".join(out)


def _view(text: str) -> tuple[str, list[int], set[int], set[int]]:
    """Return the normalised view of ``text``, each view char's origin index, and gap marks.

    ``gaps`` holds the view indices right after a dropped character (a word boundary);
    ``dashes`` those right after a dropped dash or underscore.
    """
    chars: list[str] = []
    origin: list[int] = []
    gaps: set[int] = set()
    dashes: set[int] = set()
    for i, ch in enumerate(text):
        if ch.isascii() and (ch.isalnum() or ch in "</\\|!>\"'=:."):
            folded = ch.lower()  # fast path: ASCII letters, digits and tag punctuation
        else:
            folded = _fold(ch)
        if not folded:
            gaps.add(len(chars))
            if ch == "_" or unicodedata.category(ch) == "Pd":
                dashes.add(len(chars))
            continue
        for d in folded:
            chars.append(d)
            origin.append(i)
    return "".join(chars), origin, gaps, dashes


def find_tags(text: str) -> list[TagHit]:
    """Return every fence-namespace or role-like tag in ``text`` (normalised view), in order.

    Returns:
        ``list[TagHit]``, by ``start`` ascending; ``[]`` when ``text`` has no ``<``-like char.
    """
    if not _OPENER_RE.search(text):
        return []
    view, origin, gaps, dashes = _view(text)
    hits: list[TagHit] = []
    for m in _TAG_RE.finditer(view):
        name, end = m.group("name"), m.end()
        if name in PREFIX_NAMES:
            pass
        elif end < len(view) and end not in gaps and (view[end].isalnum() or view[end] in "/."):
            continue  # a longer word or a path: <username>, <systemd>, <sys/types.h>
        elif any(k in dashes for k in range(m.start() + 1, m.start("name") + 1)):
            continue  # an arrow, not a tag: x <- model, a <-- user
        hits.append(TagHit(origin[m.start()], name, bool(set(m.group("slash")) & {"/", "\\"})))
    return hits


def neutralise(text: str) -> str:
    """Return ``text`` with the ``<`` of every fence or role-like tag replaced by ``[`` (``SUBSTITUTE``).

    Detection is on the normalised view (module docstring); the replacement is applied to
    the original character at the tag's start, so all other text, and the length, are kept.
    Idempotent: ``neutralise(neutralise(t)) == neutralise(t)``.
    """
    hits = find_tags(text)
    if not hits:
        return text
    out = list(text)
    for hit in hits:
        out[hit.start] = SUBSTITUTE
    return "".join(out)


def neutralise_data(value: Any) -> Any:
    """Return a copy of a JSON-like value with every string (keys too) ``neutralise``d.

    dicts, lists and tuples are rebuilt (tuples become lists); other values are returned as is.
    """
    if isinstance(value, str):
        return neutralise(value)
    if isinstance(value, dict):
        return {neutralise(k) if isinstance(k, str) else k: neutralise_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [neutralise_data(v) for v in value]
    return value


_ATTR_NAME = re.compile(r"[a-z][a-z0-9_-]{0,63}")


def _attr_value(value: object) -> str:
    """Escape an attribute value: nothing in it can end the quotes or the tag."""
    out = []
    for ch in str(value)[:256]:
        folded = unicodedata.normalize("NFKC", ch) + _fold(ch)  # "‹" and "«" are escaped like "<"
        if ch in "\t\n\r" or ch == " ":
            out.append(" ")
        elif unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp"):
            continue
        elif any(c in folded for c in "\"'<>&`"):
            out.append(f"&#{ord(ch)};")
        else:
            out.append(ch)
    return "".join(out)


def open_tag(**attrs: object) -> str:
    """Return the opening fence tag with ``DEFAULT_ATTRS`` then ``attrs`` (``None`` values left out).

    Raises:
        ValueError: an attribute name outside ``[a-z][a-z0-9_-]*`` (≤ 64 chars).
    """
    merged: dict[str, object] = {**DEFAULT_ATTRS, **attrs}
    parts = [FENCE_NAME]
    for name, value in merged.items():
        if not _ATTR_NAME.fullmatch(name):
            raise ValueError(f"bad fence attribute name {name!r}")
        if value is not None:
            parts.append(f'{name}="{_attr_value(value)}"')
    return "<" + " ".join(parts) + ">"


def fence(text: str, **attrs: object) -> str:
    """Return ``text`` neutralised and wrapped in one ``<aimem-memory …>`` … ``</aimem-memory>``.

    Shape: ``open_tag(**attrs) + "\\n" + neutralise(text) + "\\n" + CLOSE_TAG``, so
    ``len(fence(t)) == len(fence("")) + len(t)`` for the same ``attrs``. Attribute values
    are escaped (quotes, ``<``, ``>``, ``&`` and their compatibility forms become numeric
    character references; control and format characters are dropped).

    Raises:
        ValueError: a bad attribute name (see ``open_tag``).
    """
    return f"{open_tag(**attrs)}\n{neutralise(text)}\n{CLOSE_TAG}"


def unfence(text: str) -> str:
    """Return the inside of a ``fence()`` block, or ``text`` unchanged when it is not one."""
    if text.startswith(f"<{FENCE_NAME}") and text.endswith(f"\n{CLOSE_TAG}"):
        head, sep, rest = text.partition(">\n")
        if sep and "\n" not in head:
            return rest[: -len(CLOSE_TAG) - 1]
    return text


def fence_counts(text: str) -> tuple[int, int]:
    """Return ``(opening, closing)`` counts of fence-namespace tags in ``text`` (normalised view).

    A text made by ``fence()`` has exactly ``(1, 1)`` whatever it wrapped.
    """
    hits = [h for h in find_tags(text) if h.name in PREFIX_NAMES]
    closing = sum(h.closing for h in hits)
    return len(hits) - closing, closing

