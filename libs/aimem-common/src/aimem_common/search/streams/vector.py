"""vector: cosine between the caller's query vector and the page chunks; a page scores its best.

Chunks (``page_chunk_embeddings``) of the same ``{provider, model, dim}`` and the page's
current hash (``read.vectors``: exact numpy, HNSW for a large scope); a page scores its best
chunk, so any part of a long page can find it. Stale rows are ignored. Runs only when the caller has a query vector.

Weight 1.0: a page is ranked by its best chunk (~75-token windows of its lines and captured
turns, aimem_common.chunking), so a long session page is seen whole. LoCoMo dev with the local
all-MiniLM-L6-v2 (bench/locomo.py --offline --vectors; 757 questions, no vectors: hit@5 0.956,
MRR 0.816): 300-character windows at 0.3 / 0.6 / 1.0 / 1.5 / 2.0 / 3.0 gave hit@5 0.959 / 0.959 /
0.958 / 0.955 / 0.955 / 0.947 and MRR 0.818 / 0.825 / 0.829 / 0.832 / 0.829 / 0.821; 800-character
windows peaked lower (1.0: hit@5 0.951, MRR 0.823). 1.0 is the flat top that keeps hit@5. A
cosine margin bonus like the bm25 streams' moved MRR by +0.005 (within noise, so not kept).
"""

from __future__ import annotations

from aimem_common.errors import BadRequestError
from aimem_common.read.vectors import ChunkVectors, Identity
from aimem_common.search.stream import Ranked, Run, stream

WEIGHT = 1.0
# When no word or entity matched, the vector is the only evidence and gets VECTOR_ALONE_WEIGHT
# (else its own hits would trail their link neighbours).
VECTOR_ALONE_WEIGHT = 1.0
# A page's score = its best chunk + CHUNK_NEXT_SHARE × its second: on LoCoMo 0.5 gave MRR 0.830
# against 0.829 for 0 (800-character windows: 0.3 -> 0.819, 0.6 -> 0.820 against 0.823), so the
# best chunk alone decides: a page is as relevant as its most relevant part.
CHUNK_NEXT_SHARE = 0.0


@stream("vector", weight=WEIGHT, alone_weight=VECTOR_ALONE_WEIGHT)
def rank(run: Run) -> Ranked | None:
    """Pages by their chunks' cosine to the question: best chunk + ``CHUNK_NEXT_SHARE`` × the next.

    ``[(page_id, score)]`` best first; ``run.chunks`` = ``{page_id: [(chunk index, cosine), ...]}``
    (explain). ``run.vectors`` is the process's copy (``ReaderPool.vectors``); None loads the
    scope's rows for this call only.

    Raises:
        BadRequestError: the vector has not ``dim`` finite values (``bad_vector``).
    """
    qv = run.vector
    if qv is None:
        return None
    import numpy as np

    q = np.asarray(qv.vector, dtype=np.float32)
    if q.shape != (qv.dim,) or not np.isfinite(q).all():
        raise BadRequestError(f"query vector must have {qv.dim} finite values", code="bad_vector")
    qn = float(np.linalg.norm(q))
    if qn == 0.0:
        return []
    index = run.vectors if run.vectors is not None else ChunkVectors(ann_min_rows=0)
    near = index.nearest(run.conn, q / qn, Identity(qv.provider, qv.model, qv.dim),
                         None if run.scopes is None else [s.project_id for s in run.scopes], run.opts.candidates)
    run.chunks = near
    ranked = [(pid, cs[0][1] + CHUNK_NEXT_SHARE * (cs[1][1] if len(cs) > 1 else 0.0)) for pid, cs in near.items()]
    ranked.sort(key=lambda kv: (-kv[1], kv[0]))
    return ranked
