"""Every tuned number of the ranking, in one frozen object.

The ranker (:class:`daemon.ranking.ranker.Ranker`) reads its weights, depths and switches
from a :class:`RankingParams` given to it at construction; the engine's default is
``RankingParams()``. A tuning run or a test passes a variant made with
:func:`dataclasses.replace` instead of patching module globals. What each value does, how it
was measured and what the alternatives scored: ``docs/ranking.md`` (one section per field).

Numbers that are limits rather than tuning (the longest query, cache sizes) stay constants
where they are used; numbers baked into the index when it is built (BM25 ``k1``/``b`` of
:class:`daemon.index.changes.EngineConfig`, the names channel's API boost) live with the
index, since changing them needs a rebuild.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RankingParams:
    """The ranking's tuned numbers; each field's comment says what it does."""

    #: How many candidates each channel contributes to fusion.
    channel_depth: int = 100
    #: The RRF constant k: a channel's vote for its rank r is weight / (k + r).
    rrf_k: int = 60
    #: RRF weight of the names channel for a name query it has hits for (the others break ties).
    names_weight: float = 4.0
    #: RRF weight of the lexical channels for a query written in the other script than the code.
    cross_script_weight: float = 0.0
    #: RRF weight of the lexical channels for such a query whose words the lexicon translated.
    translated_lexical_weight: float = 2.0
    #: A Latin acronym spelled in Cyrillic ("смс") also searches its Latin spelling ("sms") in BM25.
    latin_acronyms: bool = True
    #: A Russian question word also searches the stems Snowball misses (перехватывает -> перехват) in BM25.
    russian_word_forms: bool = True
    #: RRF weight of the metadata BM25 channel, as a factor of the BM25 weight (metadata questions).
    meta_weight: float = 1.0
    #: RRF weight of the metadata-names channel in lexical mode, as a factor of the BM25 weight.
    metanames_weight: float = 2.0
    #: The same in hybrid mode (0: the channel is left out).
    metanames_hybrid_weight: float = 0.0
    #: RRF weight of the dense channel (every kind of query; a documentation search uses docs_dense_weight).
    dense_weight: float = 0.35
    #: RRF weight of the metadata-restricted dense channel of a metadata question (hybrid mode).
    meta_dense_weight: float = 2.0
    #: The metadata dense channel reads channel_depth times this many dense hits.
    meta_dense_depth: int = 10
    #: 1: the dense channel of a how-to question keeps code chunks only (hybrid mode); 0: every chunk.
    howto_dense_code_only: bool = True
    #: That code-only dense channel reads channel_depth times this many dense hits.
    howto_dense_depth: int = 2
    #: RRF weight of the dense channel of the question's translation (dense_tr) for a cross-script question.
    translated_dense_weight: float = 2.0
    #: RRF weight of the api channel: a question's candidates ordered by the names channel's API boost.
    api_prior_weight: float = 0.5
    #: Share of the api channel's weight a where/how question keeps (an interrogative word, no infinitive).
    api_where_how_share: float = 0.0
    #: Share of the uncued metadata channels' weight a where/how question keeps.
    where_how_uncued_share: float = 0.5
    #: The api channel's order adds this times ln(1 + callers) to the API boost (callers: the reference graph's).
    api_fanin_weight: float = 0.0
    #: A name query's matches of one match kind: API boost plus this times ln(1 + callers), then the shorter name.
    names_fanin_weight: float = 0.1
    #: Candidates of each voting channel (bm25, dense, dense_tr) the api channel orders.
    api_prior_depth: int = 30
    #: Share of the metadata channels' weight for a question with neither a metadata cue nor a how-to verb.
    uncued_meta_weight: float = 0.075
    #: Test code's fused score is multiplied by this (1: no demotion); production code that matches equally wins.
    test_code_factor: float = 0.75
    #: First: the methods a question spells word by word ("значение реквизита объекта").
    spelled_name_first: bool = True
    #: First: the handler of an event of an object the question names; the object of "where is <object> stored".
    named_object_first: bool = True
    #: First: a field the question names with its object by all their words, then the object.
    named_field_first: bool = True
    #: Objects and fields named in words: a name's word also matches the question's word it is a prefix of, or back.
    object_word_variants: bool = True
    #: Metadata questions: a field in the ranking brings its object in just above it.
    object_rollup: bool = True
    #: Metadata questions: the first hits bring in the objects they are one unit with (option and constant).
    linked_objects: bool = True
    #: How many of the first hits bring their linked objects in.
    link_depth: int = 1
    #: At most this many linked objects per hit.
    link_partners: int = 3
    #: RRF weight of the dense channel in a documentation search.
    docs_dense_weight: float = 0.5
    #: Factor of the lexical weights of a documentation search in a language few pages are written in (1: off).
    docs_cross_script_weight: float = 1.0
    #: Below this share of docs sections in the question's language, the question counts as foreign to the pages.
    docs_cross_lang_share: float = 0.1
