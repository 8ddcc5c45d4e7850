"""Ranking of platform help: one platform index's channels fused by RRF, and the fusion of the
export root's hits with the platform's for ``scope: "all"``.

Channels of a platform query (:class:`PlatformRanker`):

* *names*: for a name (``СтрНайти``, ``StrFind``, ``ТаблицаЗначений.Свернуть``, ``СтрЧВх``) the
  bilingual names channel (:class:`daemon.index.platform_index.BilingualNames`); its exact,
  prefix and CamelHump matches lead the answer in its own order (the kind's boost: a global
  function before same-named methods), as for code;
* *bm25*: BM25 over the entries' texts with the query's own tokens (the entries carry their
  English names, so an English question's words count too);
* *bm25_tr*: for a question in English, its words carried into Russian by the lexicon
  (:func:`daemon.text.lexicon.translated_query`);
* *dense*: the embedded entries, searched with the query's vector, or with the vector of its
  Russian words for an English question (:attr:`daemon.ranking.cues.QueryCues.translated`);
* *kind*: a question's candidates ordered by their kind (a global function or a type before a
  member, a member before an enumeration value), as the code ranking's *api* channel orders by
  the public-API boost.

The tuned numbers are a :class:`~daemon.ranking.params.RankingParams` of their own
(:data:`PLATFORM_PARAMS`); what they are and how they were measured: ``docs/platform-help.md``.
"""

from __future__ import annotations

from dataclasses import replace

import msgspec
import numpy as np

from ..contract import Hit
from ..index.embed import vector_chunk
from ..text.lexicon import translated_query
from ..text.tokenize import tokenize_query
from .cues import QueryCues, read_cues, with_translation
from .fusion import rrf
from .params import RankingParams

__all__ = ["NAME_TIER", "PLATFORM_PARAMS", "PlatformRanker", "entry_hit", "first_sentence", "fuse_all"]

#: Names-channel match kinds that lead a name query's answer.
NAME_TIER = ("exact", "prefix", "camelhump")

#: The platform ranking's numbers: the code ranking's fields that mean the same here
#: (``channel_depth``, ``rrf_k``, ``names_weight``, ``dense_weight``, ``cross_script_weight`` as
#: the weight of an English question's own BM25 tokens, ``translated_lexical_weight`` of its
#: Russian words, ``translated_dense_weight``, and ``api_prior_weight``/``api_prior_depth`` for the
#: *kind* channel); the metadata fields are not read. Measured on ``tests/gold/platform_dev.jsonl``
#: and its two folds (``docs/platform-help.md``, "Quality").
PLATFORM_PARAMS = replace(
    RankingParams(),
    channel_depth=100,
    rrf_k=60,
    names_weight=4.0,
    dense_weight=1.0,
    cross_script_weight=0.5,
    translated_lexical_weight=2.0,
    translated_dense_weight=1.0,
    api_prior_weight=1.0,
    api_prior_depth=30,
)

#: Characters of a hit's snippet (the entry's first sentence).
SNIPPET_CHARS = 200


def first_sentence(text: str, max_chars: int = SNIPPET_CHARS) -> str:
    """The first sentence of a description (up to ``. `` or a line end), whitespace
    collapsed, at most ``max_chars`` characters (``…`` when cut)."""
    flat = " ".join(text.split())
    end = flat.find(". ")
    if 0 < end < max_chars:
        return flat[: end + 1]
    return flat if len(flat) <= max_chars else flat[: max_chars - 1] + "…"


class PlatformRanker:
    """Ranks the entries of one platform index (:class:`daemon.index.platform_index.PlatformIndex`)
    for a query. Reads the index only (its dense side under the index's ``dense_lock``);
    thread-safe as the index is immutable. ``stem``: as the index's BM25 was built."""

    def __init__(self, index, *, params: RankingParams | None = None, stem: bool = True) -> None:
        self.index = index
        self.params = params if params is not None else PLATFORM_PARAMS
        self.stem = stem

    def cues(self, text: str, *, translate: bool) -> QueryCues:
        """The query's cues over the entries' (Russian) names; ``translate``: fill the
        translation of an English question for the dense channel."""
        cues = read_cues(text, corpus_cyrillic=self.index.cyrillic_share(), docs=False)
        return with_translation(cues) if translate and self.params.translated_dense_weight else cues

    def rank(
        self,
        cues: QueryCues,
        mode: str,
        top_k: int,
        *,
        allow: np.ndarray | None = None,
        qvec=None,
        snippets: bool = True,
    ) -> tuple[list[Hit], list[int], int]:
        """``(hits, slots, total)``: the best ``top_k`` entries (``slots[i]`` is ``hits[i]``'s
        entry), and the number of distinct entries fused. ``mode``: ``hybrid``, ``lexical`` or
        ``vector``; ``allow``: a bool mask over slots (kinds asked for); ``qvec``: the query's
        vector (the translation's for an English question), None without one."""
        lists, weights, match = self.channels(cues, mode, allow, qvec)
        fused = rrf(lists, k=self.params.rrf_k, weights=weights)
        if match:
            first = [t for t in fused if match.get(t[0]) in NAME_TIER]
            first.sort(key=lambda t: t[2]["names"])
            fused = first + [t for t in fused if match.get(t[0]) not in NAME_TIER]
        store = self.index.store
        hits: list[Hit] = []
        slots: list[int] = []
        for cid, score, ranks in fused[:top_k]:
            slot = store.slot_of.get(cid)
            if slot is None:
                continue
            hits.append(entry_hit(store.get(slot), score, ranks, match.get(cid, ""), snippets))
            slots.append(slot)
        return hits, slots, len(fused)

    def channels(
        self, cues: QueryCues, mode: str, allow: np.ndarray | None, qvec
    ) -> tuple[dict[str, list[str]], dict[str, float], dict[str, str]]:
        """``(lists, weights, match)``: each channel's chunk ids best first, its RRF weight, and
        the names channel's match kind per chunk id."""
        p, ix = self.params, self.index
        ids = ix.store.ids
        lists: dict[str, list[str]] = {}
        weights: dict[str, float] = {}
        match: dict[str, str] = {}
        if not cues.text:
            return lists, weights, match
        if mode in ("hybrid", "lexical"):
            if cues.identifier:
                res = ix.names.search(cues.text, p.channel_depth, allow=allow, key_of=ids)
                lists["names"] = [ids[s] for s, _, _ in res]
                match.update({ids[s]: m for s, _, m in res})
                weights["names"] = p.names_weight if res else 0.0
            qtok = tokenize_query(cues.text, stem=self.stem)
            res = ix.bm25.search(qtok, p.channel_depth, allow=allow, key_of=ids)
            lists["bm25"] = [ids[s] for s, _ in res]
            weights["bm25"] = p.cross_script_weight if cues.cross_script else 1.0
            if cues.cross_script and not cues.identifier:
                translated = translated_query(qtok, cues.to)
                if translated:
                    res = ix.bm25.search(translated, p.channel_depth, allow=allow, key_of=ids)
                    lists["bm25_tr"] = [ids[s] for s, _ in res]
                    weights["bm25_tr"] = p.translated_lexical_weight
        if mode in ("hybrid", "vector") and qvec is not None and ix.dense is not None:
            self._dense_channel(lists, weights, cues, allow, qvec)
        if p.api_prior_weight and mode != "vector" and not cues.identifier:
            self._kind_channel(lists, weights)
        return lists, weights, match

    def _kind_channel(self, lists: dict[str, list[str]], weights: dict[str, float]) -> None:
        """*kind*: a question's top ``api_prior_depth`` candidates of the voting channels ordered
        by the names channel's boost of their entry (a global function or a type before a member,
        a member before an enumeration value: :data:`daemon.index.platform_index.BOOSTS`), ties by
        their best rank; the code ranking's *api* channel, with the platform's boost."""
        p, ix = self.params, self.index
        depth = int(p.api_prior_depth)
        best: dict[str, int] = {}
        for name, keys in lists.items():
            if not weights.get(name):
                continue
            for r, k in enumerate(keys[:depth]):
                if k not in best or r < best[k]:
                    best[k] = r
        slot_of = ix.store.slot_of
        boost = {k: ix.names.boost(s) if (s := slot_of.get(k)) is not None else 0.0 for k in best}
        lists["kind"] = sorted(best, key=lambda k: (-boost[k], best[k], k))
        weights["kind"] = p.api_prior_weight

    def _dense_channel(self, lists, weights, cues: QueryCues, allow: np.ndarray | None, qvec) -> None:
        """*dense* (or *dense_tr*: the vector of an English question's Russian words)."""
        p, ix = self.params, self.index
        with ix.dense_lock:
            dense = ix.dense
        if not len(dense):
            return
        by_id = None
        if allow is not None:
            slot_of = ix.store.slot_of
            n = len(allow)

            def by_id(cid: str) -> bool:
                s = slot_of.get(cid)
                return s is not None and s < n and bool(allow[s])

        res = dense.search_grouped(qvec, p.channel_depth, vector_chunk, allow=by_id)
        name = "dense_tr" if cues.translated else "dense"
        lists[name] = [k for k, _ in res]
        weights[name] = p.translated_dense_weight if cues.translated else p.dense_weight


def entry_hit(c, score: float, ranks: dict[str, int], match: str, snippets: bool = True) -> Hit:
    """A platform entry's record as a search hit: its place is ``platform/<version>/<file>``,
    its symbol the qualified name, its snippet the description's first sentence."""
    return Hit(
        id=c.id,
        path=c.path,
        symbol=c.symbol,
        kind=c.kind,
        name=c.name,
        owner=c.owner,
        signature=c.signature,
        start_line=1,
        end_line=1,
        score=round(score, 6),
        ranks=ranks,
        match=match,
        snippet=first_sentence(c.doc) if snippets else "",
    )


def fuse_all(code: list[Hit], platform: list[Hit], top_k: int, *, k: int = 60) -> tuple[list[Hit], int]:
    """``scope: "all"``: the export root's ranked hits and the platform's fused by plain RRF
    (each list one vote, ``k`` as the channels'), with a platform entry the query names
    exactly first (an identifier query's exact name: the ≥ 99 % target), the code's own name
    matches after it in their order. Returns the first ``top_k`` and the number fused; every
    hit keeps its kind (``platform_*`` for platform entries)."""
    by_id = {h.id: h for h in code}
    by_id.update({h.id: h for h in platform})
    fused = rrf({"code": [h.id for h in code], "platform": [h.id for h in platform]}, k=k)
    exact = [h.id for h in platform if h.match == "exact"]
    named = [h.id for h in code if h.match in NAME_TIER]
    head = exact + [i for i in named if i not in exact]
    placed = set(head)
    order = head + [t[0] for t in fused if t[0] not in placed]
    scores = {t[0]: t[1] for t in fused}
    # each hit keeps its own ranking's channel ranks; its score becomes the fused one
    out = [msgspec.structs.replace(by_id[cid], score=round(scores.get(cid, 0.0), 6)) for cid in order[:top_k]]
    return out, len(order)
