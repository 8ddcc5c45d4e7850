"""The query side of a documentation search: the question's language against the pages'
languages, its BM25 words carried into the pages' language, and the channel weights.

A docs root (or ``scope="docs"``) is searched with the code's channels but its own weights
(:func:`docs_weights`) and its own cross-language rule: docs pages are often bilingual, so the
question's language is compared with the languages of the pages (each section's ``lang``
property, :func:`daemon.sources.markdown.page_language`), not with the script of the headings.
"""

from __future__ import annotations

import re

import numpy as np

from ..text.lexicon import default_lexicon, translated_query
from .params import RankingParams

_share_cache: dict[tuple[int, int], dict[str, float]] = {}
_CYR = re.compile(r"[а-яёА-ЯЁ]")
_LAT = re.compile(r"[a-zA-Z]")


def query_language(query: str) -> str | None:
    """``ru`` for a question with a Cyrillic letter (``параметр ignoredAuthors`` is Russian:
    the Latin word is a key), ``en`` for Latin letters only, None without letters."""
    if _CYR.search(query):
        return "ru"
    return "en" if _LAT.search(query) else None


def docs_language_shares(store) -> dict[str, float]:
    """``{lang: share of the docs sections}`` by each section's ``lang`` property over a
    :class:`daemon.index.chunkstore.ChunkStore`; only the docs sections are read; cached per
    store and version. ``{}`` without docs."""
    key = (id(store), store.version)
    hit = _share_cache.get(key)
    if hit is None:
        counts: dict[str, int] = {}
        slots = np.flatnonzero(store.mask(scope="docs"))
        for sl in slots:
            lang = store.get(int(sl)).properties.get("lang", "")
            counts[lang] = counts.get(lang, 0) + 1
        hit = {k: v / len(slots) for k, v in counts.items()} if len(slots) else {}
        _share_cache.clear()
        _share_cache[key] = hit
    return hit


def docs_foreign_target(query: str, store, params: RankingParams) -> str | None:
    """The language the docs pages are written in (``ru`` / ``en``) when ``query`` is in the
    other one and fewer than ``params.docs_cross_lang_share`` of the docs sections are in the
    question's language (an English question over Russian-only pages); else None (a Russian
    question, a bilingual site, a question without letters)."""
    lang = query_language(query)
    shares = docs_language_shares(store)
    if not lang or not shares or shares.get(lang, 0.0) >= params.docs_cross_lang_share:
        return None
    other = "ru" if lang == "en" else "en"
    return other if shares.get(other, 0.0) > 0.5 else None


def docs_query_tokens(tokens: list[str], query: str, store, params: RankingParams) -> tuple[list[str], float]:
    """(BM25 tokens, factor of the BM25 weight) of a documentation search: ``tokens`` and 1.0,
    or, when the pages are in the other language (:func:`docs_foreign_target`), the lexicon's
    translations (:func:`daemon.text.lexicon.translated_query`) plus the tokens it cannot
    translate, and ``params.translated_lexical_weight``. Nothing translates: ``tokens`` and
    1.0 (the BM25 vote stays)."""
    target = docs_foreign_target(query, store, params)
    if target is None:
        return tokens, 1.0
    out = translated_query(tokens, target)
    if not out:
        return tokens, 1.0
    # the words the lexicon has no translation for (product names and identifiers: ``ADO``,
    # ``RecordSet``, ``JUnit``) stand in the pages as written: they keep their vote
    lex = default_lexicon()
    kept = [t for t in tokens if not lex.translate([t], target)]
    return list(dict.fromkeys(out + kept)), params.translated_lexical_weight


def docs_weights(weights: dict[str, float], query: str, store, params: RankingParams) -> dict[str, float]:
    """The channel weights of a documentation search: ``weights`` with the dense channel at
    ``params.docs_dense_weight``, and the lexical ones times ``params.docs_cross_script_weight``
    when the dense channel is there to answer and fewer than ``params.docs_cross_lang_share``
    of the docs sections (``store``: the chunk store) are in the question's language."""
    out = dict(weights)
    if "dense" in out:
        out["dense"] = params.docs_dense_weight
        if params.docs_cross_script_weight == 1.0:  # no rule: the pages' languages are not needed
            return out
        lang = query_language(query)
        shares = docs_language_shares(store)
        if lang and shares and shares.get(lang, 0.0) < params.docs_cross_lang_share:
            for k in ("names", "bm25", "meta"):
                if k in out:
                    out[k] *= params.docs_cross_script_weight
    return out
