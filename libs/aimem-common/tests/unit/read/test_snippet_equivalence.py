"""``text.snippet`` tests only the words where a term occurs: it picks the same window as testing
every word (the reference below, the implementation it replaced) on random and hostile texts."""

from __future__ import annotations

import random

from aimem_common.read import text
from aimem_common.read.text import _CJK_RE, _MARKUP_TOKENS, _STRIP_CHARS, MAX_SNIPPET_SCAN_WORDS, _stem, snippet


def reference(body_text: str, terms: list[str], *, n_words: int = 24) -> str:
    body = text.strip_frontmatter(body_text)
    ws = [w for w in body.split(None, MAX_SNIPPET_SCAN_WORDS)[:MAX_SNIPPET_SCAN_WORDS] if w not in _MARKUP_TOKENS]
    if len(ws) <= n_words:
        return " ".join(ws)
    stems = tuple(_stem(t) for t in terms)
    cjk = tuple(t for t in terms if _CJK_RE.match(t))
    hits = []
    if stems:
        for i, w in enumerate(ws):
            lw = w.casefold().strip(_STRIP_CHARS)
            if lw.startswith(stems) or (cjk and any(t in lw for t in cjk)):
                hits.append(i)
    start = 0
    if hits:
        best = -1
        for j, h in enumerate(hits):
            s = max(0, min(h - n_words // 4, len(ws) - n_words))
            count = sum(1 for x in hits[max(0, j - n_words):j + n_words] if s <= x < s + n_words)
            if count > best:
                best, start = count, s
    end = start + n_words
    out = " ".join(ws[start:end])
    return ("… " if start > 0 else "") + out + (" …" if end < len(ws) else "")


VOCAB = ["retry", "Retrying", "(migrations)", "migration.", "STRASSE", "Straße", "straße", "İstanbul", "ß",
         "缓存策略", "数据库", "我们使用Redis缓存", "#", "-", "```", "**bold**", "x\x00y", "ﬁle", "file", "ΣΑΣ", "σας",
         "payment", "worker", "pool", "timeout", "the", "a", "of", "err_4711", "v2.3.1", "2.3.1", "k8s", "…"]


def test_snippet_matches_testing_every_word():
    rng = random.Random(28)
    cases = 0
    for _ in range(3000):
        words = [rng.choice(VOCAB) for _ in range(rng.randint(0, 400))]
        body = rng.choice([" ", "\n", "  \t"]).join(words)
        if rng.random() < 0.1:
            body = "---\ntitle: x\n---\n" + body
        terms = rng.sample(["retry", "migrations", "strasse", "straße", "istanbul", "缓存", "数据", "redis",
                            "payment", "pool", "err_4711", "2.3.1", "", "ss", "σας", "file"], rng.randint(0, 4))
        n = rng.choice([3, 8, 24, 120])
        want = reference(body, terms, n_words=n)
        assert snippet(body, terms, n_words=n) == want, (terms, n, body[:200])
        assert snippet(body, terms, n_words=n) == want  # the page's words kept from the first call
        cases += 1
    assert cases == 3000


def test_a_text_too_long_to_keep_gives_the_same_window():
    rng = random.Random(29)
    body = " ".join(rng.choice(VOCAB) for _ in range(text.SNIPPET_MEMO_CHARS // 4))
    assert len(body) > text.SNIPPET_MEMO_CHARS
    for terms in (["payment", "pool"], ["缓存"], ["err_4711", "file"]):
        assert snippet(body, terms) == reference(body, terms)


def test_one_kept_page_asked_with_many_term_sets_gives_the_reference_window_each_time():
    """The words each term hits are kept per page (``_Words.hits``, at most ``SNIPPET_TERMS_KEPT``
    terms, then forgotten): questions sharing some terms and not others, more terms than are
    kept, and the same question again all get the window of testing every word."""
    rng = random.Random(30)
    body = " ".join(rng.choice(VOCAB) for _ in range(900))
    pool = ["retry", "migrations", "strasse", "straße", "istanbul", "缓存", "数据", "redis", "payment", "pool",
            "err_4711", "2.3.1", "ss", "σας", "file", "worker", "timeout"] + [f"w{i}" for i in range(text.SNIPPET_TERMS_KEPT)]
    kept = text._scan_kept(body)
    for _ in range(400):
        terms = rng.sample(pool, rng.randint(1, 5))
        n = rng.choice([8, 24])
        assert snippet(body, terms, n_words=n) == reference(body, terms, n_words=n), terms
        assert len(kept.hits) <= text.SNIPPET_TERMS_KEPT
    assert kept.hits  # the page's term words are kept between calls
