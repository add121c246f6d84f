"""TK's interpretability view (TK paper, Fig. 2) as a self-contained HTML page.

For one test query it shows two documents side by side: TK's top document and the first-stage
top document that TK demoted. Each document word is coloured by the kernel its strongest match
(highest cosine to any query term, after contextualisation) falls in — the kernel whose μ is
nearest — for the chosen kernels; below each document: the per-kernel s_log^k (and s_len^k),
s_log, s_len and the final score s, all from ``TK.score_parts``.
"""

from __future__ import annotations

import html
import logging
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from rankstudy import formats
from rankstudy.atomic import atomic_open
from rankstudy.errors import StudyError
from rankstudy.evaluate import evaluate_run
from rankstudy.text.tokenize import tokenize
from rankstudy.text.vocab import Vocabulary

log = logging.getLogger(__name__)

COLOURS = ["#1a9850", "#91cf60", "#d9ef8b", "#fee08b", "#fc8d59", "#d73027"]


def choose_query(first_stage: formats.Run, neural: formats.Run, qrels: formats.Qrels) -> tuple[str, str, str]:
    """(qid, TK's top doc, demoted first-stage top doc): the query where TK gains most AP while
    replacing a non-relevant first-stage top document by a relevant one (else any changed top)."""
    tk_ap, first_ap = (dict(zip(rows["qid"], rows["value"])) for rows in
                       (evaluate_run(neural, qrels, ["AP"]), evaluate_run(first_stage, qrels, ["AP"])))
    gains = {qid: tk_ap[qid] - first_ap[qid] for qid in tk_ap}
    candidates = []
    for qid in sorted(set(first_stage) & set(neural)):
        tk_top, bm25_top = neural[qid][0][0], first_stage[qid][0][0]
        if tk_top == bm25_top:
            continue
        judged = qrels.get(qid, {})
        flipped = judged.get(tk_top, 0) > 0 and judged.get(bm25_top, 0) <= 0
        candidates.append((flipped, gains.get(qid, 0.0), qid, tk_top, bm25_top))
    if not candidates:
        raise StudyError("no query whose top document TK changed; nothing to show")
    _, _, qid, tk_top, bm25_top = max(candidates, key=lambda c: (c[0], c[1], c[2]))
    return qid, tk_top, bm25_top


def _document_texts(collection: Path, docids: set[str]) -> dict[str, str]:
    found = {}
    for docid, text in formats.iter_collection(collection, check_unique=False):
        if docid in docids:
            found[docid] = text
            if len(found) == len(docids):
                break
    return found


def _explain(model, vocab: Vocabulary, query: str, document: str, max_query: int, max_doc: int) -> dict:
    q_words, d_words = tokenize(query)[:max_query], tokenize(document)[:max_doc]
    q_ids = torch.as_tensor(vocab.encode(q_words), dtype=torch.long).unsqueeze(0)
    d_ids = torch.as_tensor(vocab.encode(d_words), dtype=torch.long).unsqueeze(0)
    with torch.inference_mode():
        parts = model.score_parts(q_ids, d_ids)
    similarity = parts["similarity"][0].masked_fill(parts["match_mask"][0] == 0, -2.0)
    best = similarity.max(dim=0).values.numpy()  # strongest match of each document word
    mus = model.kernels.mu.view(-1).numpy()
    kernel = np.abs(best[:, None] - mus[None, :]).argmin(1)
    return {"words": d_words, "best": best, "kernel": np.where(best > -2, kernel, -1),
            "values": {key: parts[key][0].numpy() for key in ("s_log_k", "s_len_k") if key in parts},
            "scores": {key: float(parts[key][0]) for key in ("s_log", "s_len", "s") if key in parts}}


def _document_html(title: str, docid: str, grade: str, view: dict, mus: np.ndarray, shown: Sequence[int]) -> str:
    spans = []
    for word, kernel, best in zip(view["words"], view["kernel"], view["best"]):
        if kernel in shown:
            colour = COLOURS[list(shown).index(kernel) % len(COLOURS)]
            spans.append(f'<span style="background:{colour}" title="cos {best:.2f} → kernel μ={mus[kernel]:.1f}">'
                         f"{html.escape(word)}</span>")
        else:
            spans.append(html.escape(word))
    rows = "".join(f"<tr><td>μ={mu:.1f}</td>" + "".join(f"<td>{view['values'][k][i]:.4f}</td>" for k in view["values"])
                   + "</tr>" for i, mu in enumerate(mus))
    header = "".join(f"<th>{html.escape(k)}</th>" for k in view["values"])
    scores = ", ".join(f"{k} = {v:.4f}" for k, v in view["scores"].items())
    return (f'<div class="doc"><h2>{html.escape(title)}</h2><p>{html.escape(docid)} — judged grade {grade}</p>'
            f'<p class="text">{" ".join(spans)}</p><p><b>{scores}</b></p>'
            f"<table><tr><th>kernel</th>{header}</tr>{rows}</table></div>")


def render(model, vocab: Vocabulary, collection: Path, queries: Path, qrels_path: Path, first_stage_path: Path,
           neural_path: Path, out: Path, max_query: int, max_doc: int, kernels: Sequence[float]) -> str:
    qrels = formats.read_qrels(qrels_path)
    qid, tk_top, bm25_top = choose_query(formats.read_run(first_stage_path), formats.read_run(neural_path), qrels)
    query = formats.read_queries(queries)[qid]
    texts = _document_texts(collection, {tk_top, bm25_top})
    mus = model.kernels.mu.view(-1).numpy()
    shown = [int(np.abs(mus - k).argmin()) for k in kernels]
    legend = " ".join(f'<span style="background:{COLOURS[i % len(COLOURS)]}">μ={mus[k]:.1f}</span>'
                      for i, k in enumerate(shown))
    judged = qrels.get(qid, {})
    documents = "".join(
        _document_html(title, docid, str(judged.get(docid, "unjudged")),
                       _explain(model, vocab, query, texts[docid], max_query, max_doc), mus, shown)
        for title, docid in (("TK's top document", tk_top), ("First-stage top document (demoted by TK)", bm25_top)))
    page = f"""<!DOCTYPE html><html><head><meta charset="utf-8"><title>TK interpretability: query {html.escape(qid)}</title>
<style>body{{font-family:sans-serif;margin:1em}} .docs{{display:flex;gap:2em}} .doc{{flex:1}}
.text{{line-height:1.8}} td,th{{padding:0 .5em;text-align:right}}</style></head><body>
<h1>Query {html.escape(qid)}: {html.escape(query)}</h1>
<p>Words coloured by the kernel of their strongest match to any query term: {legend}</p>
<div class="docs">{documents}</div></body></html>"""
    with atomic_open(out) as handle:
        handle.write(page)
    log.info("interpretability view of query %s (%s vs %s) -> %s", qid, tk_top, bm25_top, out)
    return qid
