"""Cut a page into the overlapping windows that are embedded one vector each.

An embedding model reads its first ~256 tokens only, so one vector per page leaves most of
a long page unseen. ``chunks`` packs a page's units (its lines; for a session page
also each captured turn, since the page keeps only a bounded digest of them) into windows
of at most ``CHUNK_CHARS`` characters (a turn or two of a conversation, well inside the
model's 256 tokens), and starts each window with the last unit of the previous one, so a
sentence cut at a window's edge is whole in one of them. Every window starts with the page
title: a chunk stays about its page.

A small window keeps one vector about one thing. LoCoMo dev (bench/locomo.py --offline
--vectors, all-MiniLM-L6-v2): 800-character windows gave MRR 0.823 (1,278 chunks, ~100 ms of
CPU each), 300 gave 0.829 (3,186 chunks, ~60 ms each), 200 gave 0.829 again (4,100 chunks):
300 it is.
"""

from __future__ import annotations

CHUNK_CHARS = 300
UNIT_CHARS = 300  # one longer unit (a line, a turn) is cut into pieces of this size
MAX_CHUNKS = 128  # bounds the embedding cost of a huge page; its tail past that stays unseen by vectors


def units_of(text: str) -> list[str]:
    """Split ``text`` into its non-empty lines, each ≤ ``UNIT_CHARS`` (a longer one cut at spaces).

    Lines, not paragraphs: a page's list (a session page's prompts, a decision's options) is
    one paragraph of many items, and a window boundary between items keeps each item whole.
    """
    out: list[str] = []
    for para in (text or "").splitlines():
        para = " ".join(para.split())
        while len(para) > UNIT_CHARS:
            cut = para.rfind(" ", UNIT_CHARS // 2, UNIT_CHARS)
            cut = cut if cut > 0 else UNIT_CHARS
            out.append(para[:cut])
            para = para[cut:].lstrip()
        if para:
            out.append(para)
    return out


def chunks(title: str, units: list[str], *, max_chunks: int = MAX_CHUNKS) -> list[str]:
    """Return the page's windows, in order: ``title`` + consecutive units, ≤ ``CHUNK_CHARS`` each.

    Consecutive windows share one unit (the last of the previous). At least one window (the
    title alone for an empty page); at most ``max_chunks``.
    """
    head = (title or "").strip()
    budget = max(CHUNK_CHARS - len(head), UNIT_CHARS)
    out: list[str] = []
    cur: list[str] = []
    size = 0
    for u in units:
        if cur and size + len(u) + 1 > budget:
            out.append("\n".join([head, *cur]).strip())
            if len(out) >= max_chunks:
                return out
            cur = [cur[-1]] if len(cur) > 1 else []  # overlap: the last unit starts the next window
            size = sum(len(x) + 1 for x in cur)
        cur.append(u)
        size += len(u) + 1
    if cur or not out:
        out.append("\n".join([head, *cur]).strip())
    return out[:max_chunks]
