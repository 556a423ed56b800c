"""Query text handling: content terms, the injection-safe FTS5 query, snippets.

The FTS5 query is an OR of the question's content terms, each one a double-quoted
string (DESIGN.md "Read side"): a quoted string is always a phrase to FTS5, so ``NEAR``,
``AND``, ``*``, ``^``, ``:`` column filters and parentheses in the user's text are inert.
Stopwords are dropped unless nothing else is left.
"""

from __future__ import annotations

import bisect
import functools
import re
import unicodedata
from itertools import filterfalse
from typing import NamedTuple

MAX_TERMS = 32
MAX_QUERY_CHARS = 4096  # longer input is cut before tokenising (a 10 KB paste stays cheap)

STOPWORDS = frozenset(
    """
    a about above after again against all also am an and any are aren't as at be because been
    before being below between both but by can cannot could couldn't did didn't do does doesn't
    doing don't down during each either else etc ever every few for from further get gets got had
    hadn't has hasn't have haven't having he her here hers herself him himself his how however i
    if in into is isn't it it's its itself just let like ll made make many may me might mine more
    most much must mustn't my myself need needs no nor not now of off on once one only or other
    ought our ours ourselves out over own per please re really said same say says shall she should
    shouldn't since so some still such than that that's the their theirs them themselves then
    there there's these they this those though through thus to too under until up upon us very
    via was wasn't way we were weren't what what's when where which while who whom whose why will
    with within without won't would wouldn't ve yet you your yours yourself yourselves
    tell know want wanted anything something thing things which's
    """.split()
)

_WORD_RE = re.compile(r"[^\W_]+(?:[_'.-][^\W_]+)*")
_CJK_RE = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_FRONTMATTER_RE = re.compile(r"\A---\s*\n.*?\n---\s*\n", re.S)


def index_form(text: str) -> str:
    """Return ``text`` as the page text index holds it: NFC, and ``İ`` (U+0130) as ``I``.

    NFC composes an NFD page's ``e`` + U+0301 into ``é`` (the index's tokenizer would cut the
    word at the combining mark, so ``Amélie`` never met ``Ame\u0301lie``); ``İ`` lower-cases to
    ``i`` + U+0307, a combining dot that cuts ``İstanbul`` into ``i`` and ``stanbul`` (FTS5's
    unicode61 folds it to ``i``, as this does). Other text is returned unchanged.
    """
    return unicodedata.normalize("NFC", text).replace("\u0130", "I")


def words(text: str) -> list[str]:
    """Return the NFKC, case-folded word tokens of ``text`` (``_ ' . -`` join parts)."""
    return _WORD_RE.findall(unicodedata.normalize("NFKC", text[:MAX_QUERY_CHARS]).casefold())


def query_terms(text: str, *, max_terms: int = MAX_TERMS) -> list[str]:
    """Return the distinct content terms of a question, in order, at most ``max_terms``.

    Stopwords and 1-character Latin tokens are dropped; if nothing remains, the stopwords
    are kept so "how to" still finds something. CJK runs are kept whole.
    """
    # lower(), not casefold(): the FTS tokenizer folds case the same way, so "Straße" stays
    # "straße" (casefold would make it "strasse", a word the index does not hold).
    low = unicodedata.normalize("NFKC", text[:MAX_QUERY_CHARS]).replace("\u0130", "I").lower()  # see index_form
    toks = [t.strip("'.-") for t in _WORD_RE.findall(low)]
    toks = [t for t in toks if t and (len(t) > 1 or t.isdigit() or _CJK_RE.match(t))]
    content = [t for t in toks if t not in STOPWORDS]
    chosen = content or toks
    seen: dict[str, None] = {}
    for t in chosen:
        seen.setdefault(t, None)
        if len(seen) >= max_terms:
            break
    return list(seen)


# Scripts written without spaces (the same ranges as ``db.trigram.UNSPACED_GLOB``): CJK
# ideographs, kana (with the prolonged sound mark), Hangul, Thai, Lao, Myanmar, Khmer.
_UNSPACED_RUN_RE = re.compile(
    "[\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3040-\u30ff\u3130-\u318f"
    "\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff]+"
)
MAX_TRIGRAMS = 48


def unspaced_runs(text: str) -> list[str]:
    """Return the distinct runs of unspaced-script characters in ``text`` (NFKC, in order).

    ``本番環境へのデプロイ？`` → ``["本番環境へのデプロイ"]``; ``데이터베이스를 연결`` →
    ``["데이터베이스를", "연결"]``. Latin text gives ``[]``.
    """
    seen: dict[str, None] = {}
    for run in _UNSPACED_RUN_RE.findall(unicodedata.normalize("NFKC", text[:MAX_QUERY_CHARS])):
        seen.setdefault(run, None)
    return list(seen)


def trigrams(runs: list[str], *, max_trigrams: int = MAX_TRIGRAMS) -> tuple[list[str], list[str]]:
    """Split unspaced runs into ``(trigrams, short)`` for the trigram stream.

    A run of ≥ 3 characters gives its distinct overlapping trigrams (a page holding the
    run holds all of them; one holding part of it, some); a 1–2 character run is returned
    in ``short`` (the trigram index cannot match it directly; the caller expands it to the
    indexed trigrams starting with it). At most ``max_trigrams`` trigrams.
    """
    grams: dict[str, None] = {}
    short: list[str] = []
    for run in runs + [stem for run in runs if (stem := hangul_stem(run))]:
        if len(run) < 3:
            short.append(run)
            continue
        for i in range(len(run) - 2):
            grams.setdefault(run[i:i + 3], None)
    return list(grams)[:max_trigrams], short


MIN_LATIN_TRIGRAM_CHARS = 3  # a shorter Latin/digit term has no trigram to match


def latin_terms(text: str, *, max_terms: int = MAX_TERMS) -> list[str]:
    """Return the Latin/digit parts (≥ ``MIN_LATIN_TRIGRAM_CHARS`` characters) of the question's
    content terms (``query_terms``: lower-cased, stopwords dropped), in order, distinct.

    A term glued to an unspaced script is split at it: ``我们使用Redis缓存`` → ``["redis"]``.
    The trigram stream matches them as substrings, since unicode61 indexes
    ``…のKubernetesクラスタ…`` as one token that the word ``kubernetes`` never equals.
    """
    seen: dict[str, None] = {}
    for term in query_terms(text, max_terms=max_terms):
        for part in _UNSPACED_RUN_RE.split(term):
            part = part.strip("'.-_")
            if len(part) >= MIN_LATIN_TRIGRAM_CHARS and part not in STOPWORDS:
                seen.setdefault(part, None)
    return list(seen)[:max_terms]


# Korean writes spaces between words but glues particles to them (캐시를 = 캐시 + 를): a
# question's 캐시를 must find a page's 캐시 전략을, which holds no trigram of 캐시를.
_KO_PARTICLES = ("에서", "으로", "에게", "까지", "부터", "처럼", "보다", "하고", "이나",
                 "을", "를", "이", "가", "은", "는", "의", "에", "도", "로", "와", "과", "만")
_HANGUL_RE = re.compile("[\uac00-\ud7af]+")


def hangul_stem(run: str) -> str | None:
    """A Hangul word of ≥ 3 syllables without its trailing particle (``캐시를`` → ``캐시``),
    else None: searched beside the word as written."""
    if len(run) < 3 or not _HANGUL_RE.fullmatch(run):
        return None
    for p in _KO_PARTICLES:
        if run.endswith(p) and len(run) - len(p) >= 2:
            return run[: -len(p)]
    return None


_CAMEL_RE = re.compile(r"[a-z][A-Z]")


def identifier_terms(text: str, *, max_terms: int = 8) -> list[str]:
    """Return the identifier-like words of a question, lower-cased, in order.

    An identifier is what a person copies rather than paraphrases: letters mixed with
    digits (``E1234``, ``ERR_4711``, ``v2.3.1``), snake_case, camelCase, dotted names
    (``cfg.load_all``), a number of ≥ 4 digits, or a number of three or more dotted parts
    (a bare version ``2.3.1``, an address ``10.0.0.12``; ``3.12`` reads as a quantity).
    Plain words never qualify.
    """
    out: dict[str, None] = {}
    for tok in _WORD_RE.findall(unicodedata.normalize("NFKC", text[:MAX_QUERY_CHARS])):
        tok = tok.strip("'.-")
        has_digit = any(ch.isdigit() for ch in tok)
        has_alpha = any(ch.isalpha() for ch in tok)
        if (
            (has_digit and has_alpha) or "_" in tok or _CAMEL_RE.search(tok)
            or (has_alpha and "." in tok) or (tok.isdigit() and len(tok) >= 4)
            or (tok.count(".") >= 2 and tok.replace(".", "").isdigit())
        ):
            out.setdefault(tok.lower(), None)
        if len(out) >= max_terms:
            break
    return list(out)


def fts_query(terms: list[str]) -> str | None:
    """Return the FTS5 MATCH expression ``"t1" OR "t2" ...`` or ``None`` for no terms.

    Each term is wrapped in double quotes with inner quotes doubled, the only escaping
    FTS5 needs inside a string.
    """
    if not terms:
        return None
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


def _stem(term: str) -> str:
    # A crude prefix stem so "migrations" highlights "migration" (FTS5 uses porter).
    return term if len(term) <= 4 else term[: max(4, len(term) - 3)]


def terms_held(text: str, terms: list[str], *, max_chars: int = 1000) -> int:
    """Return how many distinct ``terms`` (``query_terms``) the first ``max_chars`` of ``text``
    hold: a Latin term as a word starting with its crude stem (``migrations`` ~ ``migration``),
    a CJK term as a substring. Case-insensitive; ~100 µs for 1,000 characters on a 2-core VM."""
    if not terms:
        return 0
    low = unicodedata.normalize("NFKC", text[:max_chars]).lower()
    toks = sorted(set(_WORD_RE.findall(low)))
    held = 0
    for t in dict.fromkeys(terms):
        if _CJK_RE.match(t):
            held += t in low
            continue
        stem = _stem(t)
        i = bisect.bisect_left(toks, stem)
        held += i < len(toks) and toks[i].startswith(stem)
    return held


def strip_frontmatter(text: str) -> str:
    """Remove a leading YAML frontmatter block (``---`` … ``---``) if present."""
    return _FRONTMATTER_RE.sub("", text, count=1)


_MARKUP_TOKENS = frozenset({"#", "##", "###", "####", "-", "*", ">", "|", "---", "```"})
_STRIP_CHARS = "`*_()[]{}\"',.:;!?"
MAX_SNIPPET_SCAN_WORDS = 4000  # windows are searched in the first 4000 words only


# Pages whose words are kept for snippets, by their text: the pages a project's searches show
# again (an agent asks a project several questions). ~50 KB a page of 750 words (its words and
# their case-folded text); a text longer than SNIPPET_MEMO_CHARS is not kept. ~90 µs a page saved.
SNIPPET_MEMO = 128
SNIPPET_MEMO_CHARS = 16_384
# Per kept page, the words each question term hits (``_Words.hits``), at most this many terms: the
# questions about one project share most of their terms (its people, its modules), and finding a
# term's words again costs ~10-40 µs a page where a kept answer costs one lookup.
SNIPPET_TERMS_KEPT = 64


class _Words(NamedTuple):
    """A text's snippet words (frontmatter and markup dropped, the first ``MAX_SNIPPET_SCAN_WORDS``)."""

    ws: list[str]  # the words (shared: read, never change)
    low: str | None  # the words NUL-joined and case-folded; None when a word holds a NUL
    hits: dict[tuple[bool, str], list[int]]  # (is a CJK term, stem or term) -> the words it hits


def _scan(text: str) -> _Words:
    body = strip_frontmatter(text)
    ws = list(filterfalse(_MARKUP_TOKENS.__contains__, body.split(None, MAX_SNIPPET_SCAN_WORDS)[:MAX_SNIPPET_SCAN_WORDS]))
    joined = "\0".join(ws)
    low = joined.lower() if joined.isascii() else joined.casefold()  # the same for ASCII, 10× faster
    return _Words(ws, low if low.count("\0") == len(ws) - 1 else None, {})


_scan_kept = functools.lru_cache(maxsize=SNIPPET_MEMO)(_scan)


def snippet(text: str, terms: list[str], *, n_words: int = 24) -> str:
    """Return a ~``n_words``-word window of ``text`` holding the most query-term hits.

    Leading/trailing ``…`` mark cut text; frontmatter and markdown markers are dropped;
    whitespace collapses. With no hit the window is the start of the text. A word hits when,
    case-folded and stripped of punctuation, it starts with a term's crude stem (a CJK term:
    holds it); only the words where a stem or CJK term occurs are tested (``_hit_words``).
    The window is the first one, scanning the hits in order, that holds the most hits.
    A text's words are kept for the next call (``SNIPPET_MEMO`` texts of ≤ ``SNIPPET_MEMO_CHARS``),
    with the words each term hit in it (``SNIPPET_TERMS_KEPT`` terms a text).
    """
    w = _scan_kept(text) if len(text) <= SNIPPET_MEMO_CHARS else _scan(text)
    ws = w.ws
    if len(ws) <= n_words:
        return " ".join(ws)
    hits = _hit_words(w, tuple(_stem(t) for t in terms), tuple(t for t in terms if _CJK_RE.match(t)))
    start = 0
    if hits:
        best, last = -1, len(ws) - n_words
        lo = hi = 0  # hits[lo:hi] are the hits inside the window [s, s + n_words)
        for h in hits:  # each hit's window starts a quarter before it; s never goes back
            s = max(0, min(h - n_words // 4, last))
            while hits[lo] < s:
                lo += 1
            while hi < len(hits) and hits[hi] < s + n_words:
                hi += 1
            if hi - lo > best:
                best, start = hi - lo, s
    end = start + n_words
    out = " ".join(ws[start:end])
    return ("… " if start > 0 else "") + out + (" …" if end < len(ws) else "")


def _hit_words(w: _Words, stems: tuple[str, ...], cjk: tuple[str, ...]) -> list[int]:
    """Indices (ascending, distinct) of the words ``w.ws`` that hit: ``w.casefold().strip(_STRIP_CHARS)``
    starts with one of ``stems`` or holds one of ``cjk``: the union of each term's words
    (``_term_words``, kept in ``w.hits``)."""
    if not stems:
        return []
    found: list[list[int]] = []
    for key in dict.fromkeys([(False, t) for t in stems] + [(True, t) for t in cjk]):
        words = w.hits.get(key)
        if words is None:
            words = _term_words(w, *key)
            if len(w.hits) >= SNIPPET_TERMS_KEPT:
                w.hits.clear()
            w.hits[key] = words
        if words:
            found.append(words)
    if len(found) == 1:
        return found[0]
    return sorted(set().union(*found))


def _term_words(w: _Words, cjk: bool, needle: str) -> list[int]:
    """Indices (ascending) of the words of ``w`` that start with the stem ``needle`` (``cjk``:
    that hold the CJK term ``needle``), case-folded and stripped of ``_STRIP_CHARS``.

    A hit's ``needle`` occurs inside its case-folded word, so its occurrences in ``w.low``
    (casefold maps each character alone: the NULs between the words stay) name every
    candidate word, and only those are tested: a long page costs the occurrences, not a
    Python step per word. An empty needle, or a NUL inside a word, tests every word.
    """
    ws, low = w.ws, w.low
    if not needle or low is None:
        candidates: list[int] | range = range(len(ws))
    else:
        candidates = []
        word = pos = 0
        i = low.find(needle)
        while i >= 0:  # the index of the word holding position i: the NULs before it, counted once
            word += low.count("\0", pos, i)
            pos = i
            if not candidates or candidates[-1] != word:
                candidates.append(word)
            i = low.find(needle, i + 1)
    if cjk:
        return [i for i in candidates if needle in ws[i].casefold().strip(_STRIP_CHARS)]
    return [i for i in candidates if ws[i].casefold().strip(_STRIP_CHARS).startswith(needle)]
