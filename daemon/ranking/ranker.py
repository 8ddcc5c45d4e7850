"""The ranker: one query's channels, their weights, RRF fusion and the hits.

Channels: *names* (the symbol-name channel of a name query), *bm25* (BM25 over everything),
*meta* and *metanames* (BM25 over metadata descriptors and over their name words, for a
metadata question), *dense* (the embedded chunks), *meta_dense* (the dense ranking restricted
to metadata chunks), *dense_tr* (the dense ranking of a cross-script question's translation)
and *api* (a question's candidates ordered by the names channel's public-API boost). Which
channels a query gets, and with which RRF weight, follows from its :class:`QueryCues` and the
:class:`~daemon.ranking.params.RankingParams`; what each weight does and how it was measured is
in ``docs/ranking.md``.

:class:`Ranker` reads an index state (the chunk store and the channels) and takes no lock:
the engine holds its lock around every call. It can be built over any state object with the
attributes it reads (a test builds one from a few hand-made chunks).
"""

from __future__ import annotations

import math
import re
import unicodedata
import weakref
from collections.abc import Callable
from itertools import islice
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..contract import CODE_KINDS, DOCS_KINDS, MODULE_KINDS, SCOPES, Filters, Hit, shown
from ..index.embed import vector_chunk
from ..text.folding import fold
from ..text.lexicon import latin_acronym, name_words, translated_query
from ..text.tokenize import tokenize_query
from ..text.word_forms import extra_stems
from .cues import QueryCues, read_cues, with_translation
from .docs import docs_query_tokens, docs_weights
from .fusion import rrf
from .hits import chunk_hit
from .params import RankingParams
from .tiers import NAME_TIER, acronym_first, names_first, put_first
from .testcode import TestCode

#: Metadata masks kept per store version (one per object-type tuple a query named).
META_MASKS = 16

#: The metadata types an uncued question's metadata channels read: the objects that hold or
#: type data (records, values, settings), not the code and interface containers (common
#: modules, forms, commands, reports, data processors, roles, subsystems ...), whose
#: descriptors would otherwise answer a question about a computation with the module itself.
DATA_TYPES = (
    "Справочник",
    "Документ",
    "ЖурналДокументов",
    "Перечисление",
    "Константа",
    "РегистрСведений",
    "РегистрНакопления",
    "РегистрБухгалтерии",
    "РегистрРасчета",
    "ПланВидовХарактеристик",
    "ПланСчетов",
    "ПланВидовРасчета",
    "БизнесПроцесс",
    "Задача",
    "ПланОбмена",
    "ОбщийРеквизит",
    "ПараметрСеанса",
    "ФункциональнаяОпция",
    "ОпределяемыйТип",
    "ХранилищеНастроек",
    "Последовательность",
    "КритерийОтбора",
)

#: The object types that are tables of the infobase: where "where is X stored" finds X.
TABLE_TYPES = frozenset(
    (
        "Справочник",
        "Документ",
        "РегистрСведений",
        "РегистрНакопления",
        "РегистрБухгалтерии",
        "РегистрРасчета",
        "Константа",
        "ПланВидовХарактеристик",
        "ПланСчетов",
        "ПланВидовРасчета",
        "ПланОбмена",
        "БизнесПроцесс",
        "Задача",
        "Перечисление",
    )
)

#: Words of a storage question that name no object (index tokens).
STORAGE_WORDS = frozenset(name_words("хранятся хранится хранить храниться лежат лежит данные сведения информация"))

#: At most this many objects named in one question are read for their handlers (most words first).
NAMED_OBJECTS = 3
#: A field named with its object: the two names together have at least this many words.
FIELD_OBJECT_WORDS = 3

_FORM_WORD = re.compile(r"\bформ|\bform")

#: The object type -> the property of its descriptor that names the object it is one unit
#: with in 1C's model (``Location=Constant.X``: where a functional option is stored;
#: ``Task=Task.X``: the task type of a business process). Both directions are linked.
LINK_PROPERTIES = {"ФункциональнаяОпция": "Location", "БизнесПроцесс": "Task"}


class IndexDamaged(RuntimeError):
    """A query met index files that cannot be right (the channels raised on the loaded data):
    the lexical side is dropped and rebuilt; the query may be retried shortly."""


class Channels(NamedTuple):
    """One query's channels: ``lists`` (channel -> chunk ids, best first), ``weights``
    (channel -> RRF weight) and ``match`` (chunk id -> the names channel's match kind)."""

    lists: dict[str, list[str]]
    weights: dict[str, float]
    match: dict[str, str]


def _bsl_chunk(chunk_id: str) -> bool:
    """True for the id of a chunk of a ``.bsl`` module (a method or module-level code: the
    code kinds, and only they, come from ``.bsl`` files); read off the id's path, with no
    id -> slot lookup."""
    path = chunk_id.partition("::")[0]
    return path[-4:].lower() == ".bsl"


class _RecordingIds:
    """``ids[slot]`` (the store's id column) that also records ``{id: slot}`` for every live
    id it gives, so the hit loop needs no id -> slot lookup."""

    __slots__ = ("ids", "out")

    def __init__(self, ids, out: dict[str, int]) -> None:
        self.ids = ids
        self.out = out

    def __getitem__(self, slot: int) -> str | None:
        cid = self.ids[slot]
        if cid is not None:
            self.out[cid] = slot
        return cid


class Ranker:
    """Ranks the chunks of one index state for a query.

    ``state``: the index (:class:`daemon.index.state.IndexState` or any object with its
    ``store``, ``names``, ``bm25``, ``meta_bm25``, ``meta_names``, ``dense``, ``files``,
    ``format`` and its ``cyrillic_share()``, ``entry_name(slot)``, ``name_boost(slot)``);
    read anew on every call, so a swapped store or channel is seen. ``root``: the export
    root (absolute path prefixes are made relative to it). ``params``: the tuned numbers.
    ``stem``: the BM25 tokenizer's stemming, as the index was built. Not thread-safe: the
    caller holds the index lock around every call.
    """

    def __init__(self, state, *, root: Path, params: RankingParams | None = None, stem: bool = True) -> None:
        self.state = state
        self.root = Path(root)
        self.params = params if params is not None else RankingParams()
        self.stem = stem
        # the metadata masks of the metadata channels per object-type tuple, for one store version
        self._meta_masks: tuple = (None, None, {})
        # the linked objects of the metadata roll-up for one store version
        self._links: tuple = (None, None, {})
        self.tests = TestCode()

    # ------------------------------------------------------------------ filters
    def allow(self, f: Filters | None) -> np.ndarray | None:
        """The filters as a bool mask over chunk slots (:meth:`daemon.index.chunkstore.ChunkStore.mask`),
        None for no filter. ``ValueError`` for a bad scope, object type, module kind or prefix."""
        if f is None or f == Filters():
            return None
        if f.scope not in SCOPES:
            raise ValueError(f"scope must be one of {SCOPES}, got {f.scope!r}")
        otype = None
        if f.object_type:
            from ..contract import normalize_object_type

            otype = normalize_object_type(f.object_type)
            if otype is None:
                from ..contract import object_type_list

                raise ValueError(f"unknown object type {shown(f.object_type)}; use one of: {object_type_list()}")
        prefix = self._normalize_prefix(f.path_prefix) if f.path_prefix else None
        if f.module_kind and f.module_kind not in MODULE_KINDS:
            raise ValueError(f"unknown module kind {shown(f.module_kind)}; one of {', '.join(MODULE_KINDS)}")
        return self.state.store.mask(
            scope=f.scope,
            object_types=(otype,) if otype else None,
            module_kind=f.module_kind or None,
            path_prefix=prefix or None,
            export_only=f.export_only,
        )

    def _by_id(self, mask: np.ndarray | None) -> Callable[[str], bool] | None:
        """``mask`` as a predicate over chunk ids (for the channels keyed by id: dense)."""
        if mask is None:
            return None
        slot_of = self.state.store.slot_of
        n = len(mask)

        def allow(cid: str) -> bool:
            s = slot_of.get(cid)
            return s is not None and s < n and bool(mask[s])

        return allow

    def _normalize_prefix(self, prefix: str) -> str:
        """A path prefix relative to the root, forward slashes, NFC; an absolute prefix inside
        the root is made relative; ``ValueError`` for one outside it or with ``..``."""
        p = prefix.replace("\\", "/")
        if Path(p).is_absolute():
            try:
                p = Path(p).resolve().relative_to(self.root).as_posix()
            except ValueError:
                raise ValueError(f"path prefix {shown(prefix)} is outside the export root {self.root}") from None
            if p == ".":
                p = ""
        while p.startswith("./"):
            p = p[2:]
        if ".." in p.split("/"):
            raise ValueError(f"path prefix {shown(prefix)} contains '..'; give a prefix relative to the export root")
        return unicodedata.normalize("NFC", p)

    def is_docs_search(self, filters: Filters | None) -> bool:
        """True for a search of documentation: ``scope`` docs, or a root that holds only docs
        sections (a docs root searched in ``all``)."""
        if filters is not None and filters.scope == "docs":
            return True
        st = self.state
        if st.format != "unknown" or (filters is not None and filters.scope != "all"):
            return False
        return bool(st.files) and all(r.kind == "docs" for r in st.files.values())

    def metadata_filter(self, types: tuple[str, ...], allow: np.ndarray | None = None) -> np.ndarray:
        """Mask over chunk slots: metadata chunks (of ``types`` when given) that ``allow``
        also accepts; used by the metadata BM25 and metadata dense channels. Read-only
        without ``allow`` (the cached mask of :meth:`_metadata_mask`)."""
        m = self._metadata_mask(types)
        if allow is not None:
            m = m & (allow[: len(m)] if len(allow) >= len(m) else np.pad(allow, (0, len(m) - len(allow))))
        return m

    def _uncued_weight(self, cues: QueryCues) -> float:
        """The uncued metadata channels' share of their weight: ``uncued_meta_weight``, times
        ``where_how_uncued_share`` for a where/how question."""
        p = self.params
        return p.uncued_meta_weight * (p.where_how_uncued_share if cues.where_how else 1.0)

    def _metadata_mask(self, types: tuple[str, ...]) -> np.ndarray:
        """``store.mask(scope="metadata", object_types=types or None)``, read-only, cached per
        store version (it only changes when the store does); the mask of some object types is
        the all-types one narrowed by :meth:`ChunkStore.object_type_mask`. At most
        :data:`META_MASKS` object-type tuples are kept."""
        store = self.state.store
        ref, version, masks = self._meta_masks
        if ref is None or ref() is not store or version != (store.version, store.capacity):
            # a weak reference: a replaced store is not kept alive by its masks
            masks = {}
            self._meta_masks = (weakref.ref(store), (store.version, store.capacity), masks)
        m = masks.get(types)
        if m is None:
            if types:  # the metadata mask of every type, narrowed (one gather, not six passes)
                m = self._metadata_mask(()) & store.object_type_mask(types)
            else:
                m = store.mask(scope="metadata")
            m.flags.writeable = False
            if len(masks) >= META_MASKS:
                masks.clear()
            masks[types] = m
        return m

    # ------------------------------------------------------------------ cues
    def cues(self, text: str, filters: Filters | None = None) -> QueryCues:
        """The cues of the query ``text`` (stripped) over this index and these filters
        (:func:`daemon.ranking.cues.read_cues`); no translation yet (:meth:`translate`)."""
        return read_cues(text, corpus_cyrillic=self.state.cyrillic_share(), docs=self.is_docs_search(filters))

    def translate(self, cues: QueryCues) -> QueryCues:
        """``cues`` with the translation of a cross-script question for the *dense_tr*
        channel, when that channel has a weight (:func:`daemon.ranking.cues.with_translation`).
        Reads no index state: may run without the lock."""
        return with_translation(cues) if self.params.translated_dense_weight else cues

    # ------------------------------------------------------------------ names
    def name_hits(self, cues: QueryCues, k: int, allow: np.ndarray | None) -> list[tuple[int, float, str]]:
        """The names channel's best ``k`` entries for a name query: ``[(slot, score, match kind)]``;
        with ``names_fanin_weight``, each match kind's run in the fan-in order (:meth:`_by_fan_in`)."""
        st = self.state
        hits = st.names.search(cues.text, k, allow=allow, key_of=st.store.ids)
        w = self.params.names_fanin_weight
        if w and len(hits) > 1 and "." not in cues.text:
            hits = self._by_fan_in(hits, w)
        return hits

    def _by_fan_in(self, hits: list[tuple[int, float, str]], weight: float) -> list[tuple[int, float, str]]:
        """The names channel's ``hits`` of an unqualified name with each match kind's run
        ordered by the API boost plus ``weight`` times ln(1 + callers) (the callers from the
        reference graph: :meth:`daemon.index.state.IndexState.fan_in`), ties in the channel's
        own order (the shorter name first). A qualified name keeps the channel's order: its
        container's match kind comes before the boost and is not in the hits."""
        st = self.state
        ids = st.store.ids
        callers = st.fan_in([ids[s] for s, _, _ in hits])
        if not any(callers):  # no graph yet (or nobody calls them): the channel's order
            return hits
        key = [st.name_boost(s) + weight * math.log1p(n) for (s, _, _), n in zip(hits, callers, strict=True)]
        out: list[tuple[int, float, str]] = []
        start = 0
        for end in range(1, len(hits) + 1):
            if end == len(hits) or hits[end][2] != hits[start][2]:
                out.extend(hits[i] for i in sorted(range(start, end), key=lambda i: (-key[i], i)))
                start = end
        return out

    @staticmethod
    def names_fill(hits: list[tuple[int, float, str]], top_k: int) -> bool:
        """True if the first ``top_k`` of the names channel's ``hits`` are all first-tier
        (exact, prefix, CamelHump): then they are the whole answer (see :func:`daemon.ranking.tiers.names_first`)."""
        return sum(1 for _, _, m in hits[:top_k] if m in NAME_TIER) >= top_k

    # ------------------------------------------------------------------ channels
    def channels(
        self,
        cues: QueryCues,
        mode: str,
        allow: np.ndarray | None,
        *,
        qvec=None,
        tvec=None,
        slot_of_id: dict[str, int] | None = None,
        names: list | None = None,
    ) -> Channels:
        """The ranked chunk ids of each channel for the query of ``cues``, their RRF weights
        and the names channel's match kinds. ``allow``: a mask over slots (:meth:`allow`) or
        None. ``qvec``: the query vector (*dense*, *meta_dense*); ``tvec``: the vector of the
        question's translation (*dense_tr*), given in place of ``qvec``. ``slot_of_id``: if
        given, filled with ``{chunk id: slot}`` for the ids the lexical channels answered.
        ``names``: the names channel's hits for this query (:meth:`name_hits`, at least
        ``channel_depth`` of them or all there are), when the caller already has them.

        A documentation search (``cues.docs``) leaves out what is for code: the translation of
        the query (docs pages carry their own cross-language rule, :mod:`daemon.ranking.docs`),
        the translated names, the code-only dense channel of a how-to question, the api
        channel and the uncued metadata channels."""
        out = Channels({}, {}, {})
        if not cues.text:
            return out
        store_ids = self.state.store.ids
        ids = store_ids if slot_of_id is None else _RecordingIds(store_ids, slot_of_id)
        uncued = bool(self.params.uncued_meta_weight) and cues.uncued
        if uncued and cues.where_how and not self.params.where_how_uncued_share:
            uncued = False  # it asks where or how the code does a thing, not which object holds it
        if mode in ("hybrid", "lexical"):
            if cues.identifier:
                self._names_channel(out, cues, allow, ids, names)
            self._lexical_channels(out, cues, mode, allow, ids, uncued)
        if mode in ("hybrid", "vector"):
            self._dense_channels(out, cues, mode, allow, qvec, tvec, uncued)
        p = self.params
        if p.api_prior_weight and not cues.docs and mode != "vector" and not cues.identifier and not cues.metadata:
            self._api_channel(out, cues)
        return out

    def _names_channel(self, out: Channels, cues: QueryCues, allow, ids, names: list | None) -> None:
        """*names*: a name query's matches; none found and the name is in the other script:
        the methods whose name it is in the other language. A name query is answered by this
        channel; the others only break ties."""
        p, st = self.params, self.state
        res = names[: p.channel_depth] if names is not None else self.name_hits(cues, p.channel_depth, allow)
        out.lists["names"] = [ids[s] for s, _, _ in res]
        out.match.update({ids[s]: m for s, _, m in res})
        if not res and not cues.docs and cues.cross_script:  # the name typed in the other language
            slots = st.meta_names.translated_names(
                st.store, cues.text, cues.to, p.channel_depth, allow, st.name_boost, st.entry_name
            )
            res = [(s, 0.0, "translated") for s in slots]
            out.lists["names"] = [ids[s] for s in slots]
            out.match.update(dict.fromkeys(out.lists["names"], "translated"))
        out.weights["names"] = p.names_weight if res else 0.0

    def _query_tokens(self, cues: QueryCues) -> tuple[list[str], float]:
        """The query's BM25 tokens and the lexical channels' RRF weight: the query's own
        tokens at 1; for a cross-script query, the lexicon's translation at
        ``translated_lexical_weight`` (``cross_script_weight`` when nothing translates); for a
        documentation search, the docs rule (:func:`daemon.ranking.docs.docs_query_tokens`)."""
        p = self.params
        qtok = tokenize_query(cues.text, stem=self.stem)
        if p.latin_acronyms and not cues.cross_script and not cues.docs:
            qtok = self._with_latin_acronyms(qtok)
        if p.russian_word_forms and not cues.cross_script and not cues.docs:
            qtok = self._with_word_forms(qtok)
        weight = p.cross_script_weight if cues.cross_script else 1.0
        if not cues.docs and cues.cross_script:  # the query's words in the code's language
            translated = translated_query(qtok, cues.to)
            if translated:
                qtok, weight = translated, p.translated_lexical_weight
        elif cues.docs:  # the question's words in the pages' language
            qtok, factor = docs_query_tokens(qtok, cues.text, self.state.store, p)
            weight *= factor
        return qtok, weight

    def _with_word_forms(self, qtok: list[str]) -> list[str]:
        """``qtok`` and then the stems its Russian words also stand for
        (:func:`daemon.text.word_forms.extra_stems`: ``перехватывает`` -> ``перехват``,
        ``блокировок`` -> ``блокировк``) that the BM25 index has."""
        out = list(qtok)
        seen = set(out)
        for t in qtok:
            for s in extra_stems(t):
                if s not in seen and self.state.bm25.df(s):
                    out.append(s)
                    seen.add(s)
        return out

    def _with_latin_acronyms(self, qtok: list[str]) -> list[str]:
        """``qtok`` and, after each Latin acronym spelled in Cyrillic (``смс``), its Latin
        spelling (``sms``: :func:`daemon.text.lexicon.latin_acronym`) when the BM25 index has
        that term: the code names it in Latin letters (``ОтправитьSMS``)."""
        out = []
        for t in qtok:
            out.append(t)
            lat = latin_acronym(t)
            if lat is not None and lat not in out and self.state.bm25.df(lat):
                out.append(lat)
        return out

    def _lexical_channels(self, out: Channels, cues: QueryCues, mode: str, allow, ids, uncued: bool) -> None:
        """*bm25*; for a metadata question *meta* and *metanames*; for an uncued one *meta*
        over :data:`DATA_TYPES` at ``uncued_meta_weight`` of its weight."""
        p, st = self.params, self.state
        store_ids = st.store.ids
        qtok, lexical_weight = self._query_tokens(cues)
        res = st.bm25.search(qtok, p.channel_depth, allow=allow, key_of=store_ids)
        out.lists["bm25"] = [ids[s] for s, _ in res]
        out.weights["bm25"] = lexical_weight
        if cues.metadata:
            types = cues.object_types
            res = st.meta_bm25.search(qtok, p.channel_depth, allow=self.metadata_filter(types, allow), key_of=store_ids)
            if not res and types:
                res = st.meta_bm25.search(qtok, p.channel_depth, allow=allow, key_of=store_ids)
            out.lists["meta"] = [ids[s] for s, _ in res]
            out.weights["meta"] = p.meta_weight * lexical_weight
            self._metanames_channel(out, cues, mode, allow, ids, qtok)
        elif uncued:
            res = st.meta_bm25.search(
                qtok, p.channel_depth, allow=self.metadata_filter(DATA_TYPES, allow), key_of=store_ids
            )
            out.lists["meta"] = [ids[s] for s, _ in res]
            out.weights["meta"] = self._uncued_weight(cues) * p.meta_weight * lexical_weight

    def _metanames_channel(self, out: Channels, cues: QueryCues, mode: str, allow, ids, qtok: list[str]) -> None:
        """*metanames*: the objects and fields *named* after the query's words, unless the
        query spells out an existing method name word by word."""
        p, st = self.params, self.state
        spelled = cues.spelled
        named = bool(spelled) and any(
            m == "exact" and st.store.kind_of(s) in CODE_KINDS
            for s, _, m in st.names.search(spelled, 3, allow=allow, key_of=st.store.ids)
        )
        weight = p.metanames_weight if mode == "lexical" else p.metanames_hybrid_weight
        if named or weight <= 0:
            return
        res = st.meta_names.search(
            st.store, qtok, p.channel_depth, self.metadata_filter(cues.object_types, allow), st.entry_name
        )
        out.lists["metanames"] = [ids[s] for s in res]
        out.weights["metanames"] = weight * out.weights["bm25"]

    def _dense_channels(self, out: Channels, cues: QueryCues, mode: str, allow, qvec, tvec, uncued: bool) -> None:
        """*dense_tr* (the translation's vector), *dense* (the query's vector; a how-to
        question's keeps code chunks only) and *meta_dense* (the dense ranking restricted to
        metadata chunks, for a metadata or uncued question in hybrid mode). A chunk with
        several vectors counts once, by its best."""
        p, st = self.params, self.state
        if tvec is not None and not cues.docs and p.translated_dense_weight and len(st.dense):
            res = st.dense.search_grouped(tvec, p.channel_depth, vector_chunk, allow=self._by_id(allow))
            out.lists["dense_tr"] = [k for k, _ in res]
            out.weights["dense_tr"] = p.translated_dense_weight
        if qvec is None or not len(st.dense):
            return
        meta_weight = p.meta_dense_weight if cues.metadata else 0.0
        meta_types = cues.object_types if meta_weight else DATA_TYPES
        if not meta_weight and uncued:
            meta_weight = self._uncued_weight(cues) * p.meta_dense_weight
        meta = mode == "hybrid" and meta_weight > 0
        code_only = (
            not cues.docs and mode == "hybrid" and cues.kind == "semantic" and p.howto_dense_code_only and cues.howto
        )
        # one hnswlib search serves both channels: the metadata channel reads a deeper list
        depth = p.channel_depth * (p.meta_dense_depth if meta else p.howto_dense_depth if code_only else 1)
        res = st.dense.search_grouped(qvec, depth, vector_chunk, allow=self._by_id(allow))
        if code_only:
            out.lists["dense"] = list(islice((k for k, _ in res if _bsl_chunk(k)), p.channel_depth))
        else:
            out.lists["dense"] = [k for k, _ in res[: p.channel_depth]]
        out.weights["dense"] = p.dense_weight  # a documentation search: replaced by docs_weights
        if meta:
            meta_allow = self._by_id(self.metadata_filter(meta_types))
            out.lists["meta_dense"] = list(
                islice((k for k, _ in res if not _bsl_chunk(k) and meta_allow(k)), p.channel_depth)
            )
            out.weights["meta_dense"] = meta_weight

    def _api_channel(self, out: Channels, cues: QueryCues) -> None:
        """*api*: the top ``api_prior_depth`` candidates of the voting bm25, dense and
        dense_tr channels, ordered by the names channel's public-API boost, ties by their
        best rank (plus ``api_fanin_weight`` times ln(1 + callers), the callers from the
        reference graph: :meth:`daemon.index.state.IndexState.fan_in`); a where/how question
        (:attr:`QueryCues.where_how`) keeps ``api_where_how_share`` of the weight (it asks for
        the code that does a thing, API or not)."""
        depth = int(self.params.api_prior_depth)
        best: dict[str, int] = {}
        for name in ("bm25", "dense", "dense_tr"):
            if not out.weights.get(name):
                continue  # a channel without a vote brings no candidates either
            for r, k in enumerate(out.lists.get(name, ())[:depth]):
                if k not in best or r < best[k]:
                    best[k] = r
        st = self.state
        slot_of = st.store.slot_of
        boosts = {k: st.name_boost(s) if (s := slot_of.get(k)) is not None else 0.0 for k in best}
        w = self.params.api_fanin_weight
        if w and boosts:  # the prior's fan-in term: how many places call the method
            keys = list(boosts)
            for k, n in zip(keys, st.fan_in(keys), strict=True):
                boosts[k] += w * math.log1p(n)
        out.lists["api"] = sorted(best, key=lambda k: (-boosts[k], best[k], k))
        p = self.params
        out.weights["api"] = p.api_prior_weight * (p.api_where_how_share if cues.where_how else 1.0)

    # ------------------------------------------------------------------ ranking
    def rank(
        self,
        cues: QueryCues,
        mode: str,
        top_k: int,
        filters: Filters | None = None,
        *,
        qvec=None,
        tvec=None,
        snippets: bool = True,
        names: list | None = None,
    ) -> tuple[list[Hit], int]:
        """``(hits, total)`` for the query of ``cues``: the channels (:meth:`channels`) fused
        by weighted RRF, a name query's first-tier matches first, a metadata question's fields
        rolled up to their objects; parts of one method (and ``#Если`` twins) give one hit.
        ``total``: the distinct hits fused. ``ValueError`` for a bad filter value;
        :class:`IndexDamaged` when a channel fails on the index's data."""
        allow = self.allow(filters)
        slot_by_id: dict[str, int] = {}  # the lexical channels' slots (no id -> slot lookup below)
        try:
            lists, weights, match = self.channels(
                cues, mode, allow, qvec=qvec, tvec=tvec, slot_of_id=slot_by_id, names=names
            )
        except (IndexError, OverflowError, MemoryError) as exc:
            # the memory-mapped column files hold values no index builds (bytes damaged on disk
            # after a size-preserving write)
            raise IndexDamaged(
                "the lexical index on disk is damaged; it is being rebuilt from the export (retry in a moment)"
            ) from exc
        if cues.docs:
            weights = docs_weights(weights, cues.text, self.state.store, self.params)
        fused = rrf(lists, k=self.params.rrf_k, weights=weights)
        tests = self.tests.refresh(self.state)
        if fused and not cues.docs and self.params.test_code_factor != 1.0:
            fused = self._demote_tests(fused, tests)
        if mode != "vector" and not cues.docs and not cues.identifier:
            head = self._first_tier(cues, allow)
            if head:
                fused = put_first(fused, head)
        is_test = self._test_chunk(tests) if self.params.test_code_factor != 1.0 else None
        if match and cues.acronym:
            fused = acronym_first(fused, match, is_test)
        elif match:
            fused = names_first(fused, match, is_test)
        elif fused and mode != "vector" and not cues.docs and self.params.object_rollup and cues.metadata:
            fused = self._roll_up(fused, slot_by_id, allow)
        return self._hits(fused, slot_by_id, match, top_k, snippets)

    def _first_tier(self, cues: QueryCues, allow: np.ndarray | None) -> list[str]:
        """Chunk ids a question asks for by name, in this order: the methods whose name the
        question spells word by word (``spelled_name_first``: "значение реквизита объекта" ->
        ``ЗначениеРеквизитаОбъекта``); then, with ``named_object_first``, for a metadata
        question "where is <object> stored" that object, and for a question that names a
        platform event and an object, that object's handlers of the event
        (:meth:`_named_objects`); then, with ``named_field_first``, a field named with its
        object (:meth:`_named_fields`). Empty for most questions."""
        p, st = self.params, self.state
        store = st.store
        ids = store.ids
        out: list[str] = []
        if p.spelled_name_first and cues.spelled:
            out += [
                ids[s]
                for s, _, m in st.names.search(cues.spelled, 10, allow=allow, key_of=ids)
                if m == "exact" and store.kind_of(s) in CODE_KINDS and ids[s]
            ]
        if p.named_object_first and not cues.cross_script and (cues.named_events or cues.metadata):
            out += self._named_objects(cues, allow)
        if p.named_field_first and not cues.cross_script and not cues.howto and not cues.named_events:
            out += self._named_fields(cues, allow)
        return list(dict.fromkeys(out))

    def _named_fields(self, cues: QueryCues, allow: np.ndarray | None) -> list[str]:
        """A field the question names together with its object ("где в профиле групп доступа
        перечислены роли" -> ``ПрофилиГруппДоступа``'s ``Роли``): for each of the first
        :data:`NAMED_OBJECTS` objects of :data:`DATA_TYPES` (or of the types the question
        names) named by all of their name words, its fields whose name words are all in the
        question, are not only words of the object's name, and make with it at least
        :data:`FIELD_OBJECT_WORDS` words; then that object. Most words first. Not for a how-to
        question or one that names a platform event (both ask for code)."""
        toks = set(name_words(cues.text))
        if len(toks) < FIELD_OBJECT_WORDS:
            return []
        st = self.state
        store = st.store
        ids = store.ids
        objects = st.meta_names.ensure_objects(store)
        toks = self._variants(objects, toks)
        out: list[str] = []
        for oslot, owner, _ in objects.named(toks, cues.named_types or DATA_TYPES)[:NAMED_OBJECTS]:
            own = objects.words(oslot) or frozenset()
            fields = [
                fs
                for fs, words in objects.fields(owner, toks)
                if not words <= own
                and len(own | words) >= FIELD_OBJECT_WORDS
                and ids[fs] is not None
                and (allow is None or (fs < len(allow) and bool(allow[fs])))
            ]
            if fields:
                out += [ids[fs] for fs in fields]
                if ids[oslot] is not None and (allow is None or (oslot < len(allow) and bool(allow[oslot]))):
                    out.append(ids[oslot])
        return out

    def _named_objects(self, cues: QueryCues, allow: np.ndarray | None) -> list[str]:
        """The objects a question names in words (every word of the object's name or of one
        of its synonyms: :meth:`daemon.index.metanames.ObjectWords.named`), of the types it
        names, else of :data:`DATA_TYPES`; an object whose name is one word needs a type word,
        a metadata question or a platform event next to it. Returns, for a metadata question
        whose words but for storage and type words are exactly one object's name, of a type in
        :data:`TABLE_TYPES`, that object; then for each of the first :data:`NAMED_OBJECTS` named
        objects its handlers of the events the question names (a form's first when the
        question says "форма", the form it names first)."""
        toks = set(name_words(cues.text))
        if not toks:
            return []
        st = self.state
        store = st.store
        ids = store.ids
        types = cues.named_types
        objects = st.meta_names.ensure_objects(store)
        named = objects.named(self._variants(objects, toks), types or DATA_TYPES)
        if not types and not (cues.metadata or cues.named_events):
            named = [t for t in named if t[2] >= 2]
        named = named[:NAMED_OBJECTS]
        if not named:
            return []

        def allowed(slot: int) -> bool:
            return ids[slot] is not None and (allow is None or (slot < len(allow) and bool(allow[slot])))

        out: list[str] = []
        if cues.metadata:
            rest = toks - STORAGE_WORDS - set(name_words(" ".join(types)))
            exact = [t for t in named if objects.words(t[0]) == rest and t[1].partition(".")[0] in TABLE_TYPES]
            if len(exact) == 1 and allowed(exact[0][0]):
                out.append(ids[exact[0][0]])
        if cues.named_events:
            out += self._event_handlers(cues, toks, [owner for _, owner, _ in named], allowed)
        return out

    def _variants(self, objects, toks: set[str]) -> set[str]:
        """``toks`` with the names' words that are the same words stemmed differently
        (:meth:`daemon.index.metanames.ObjectWords.expand`), when ``object_word_variants``."""
        return objects.expand(toks) if self.params.object_word_variants else toks

    def _event_handlers(self, cues: QueryCues, toks: set[str], owners: list[str], allowed) -> list[str]:
        """Ids of the methods named like an event of ``cues.named_events`` in the modules of
        each object of ``owners`` (``Тип.Имя``), object by object; a form module's first when
        the question says "форма"/"form", then the form whose name the question holds."""
        st = self.state
        store = st.store
        slots = np.unique(np.concatenate([st.names.exact_slots(e) for e in cues.named_events]))
        slots = np.asarray([s for s in slots.tolist() if store.kind_of(s) in CODE_KINDS and allowed(s)], np.int64)
        if not slots.size:
            return []
        owner_names = store.tables["owner"].values
        kind_names = store.tables["module_kind"].values
        owner_of = [owner_names[i].split(".") for i in store.col("owner")[slots].tolist()]
        form_module = [kind_names[i] == "form" for i in store.col("module_kind")[slots].tolist()]
        form_q = _FORM_WORD.search(fold(cues.text)) is not None
        out: list[str] = []
        for owner in owners:
            mine = [
                (form_module[i] != form_q, not (len(o) >= 4 and set(name_words(o[3])) <= toks), s)
                for i, (s, o) in enumerate(zip(slots.tolist(), owner_of, strict=True))
                if ".".join(o[:2]) == owner
            ]
            out += [store.ids[s] for *_, s in sorted(mine)]
        return out

    @staticmethod
    def _test_chunk(tests: TestCode) -> Callable[[str], bool]:
        """Whether a chunk id is test code (:meth:`daemon.ranking.testcode.TestCode.is_test` of its path)."""
        return lambda cid: tests.is_test(cid.partition("::")[0])

    def _demote_tests(self, fused: list, tests: TestCode) -> list:
        """``fused`` with the scores of test code's chunks multiplied by ``test_code_factor``,
        sorted again as :func:`daemon.ranking.fusion.rrf` sorts (production code that matches
        a question as well as test code comes first)."""
        f = self.params.test_code_factor
        out = [(cid, s * f if tests.is_test(cid.partition("::")[0]) else s, r) for cid, s, r in fused]
        out.sort(key=lambda t: (-t[1], min(t[2].values()) if t[2] else 0, t[0]))
        return out

    def _hits(
        self, fused: list, slot_by_id: dict[str, int], match: dict[str, str], top_k: int, snippets: bool
    ) -> tuple[list[Hit], int]:
        """The first ``top_k`` distinct hits of ``fused`` and the number of distinct hits; no
        chunk is read for the candidates past ``top_k``."""
        hits: list[Hit] = []
        seen: set[tuple[str, str | None]] = set()
        store = self.state.store
        slot_of = store.slot_of
        for cid, score, ranks in fused:
            slot = slot_by_id.get(cid)
            if slot is None:
                slot = slot_of.get(cid)  # the dense channels answer ids
                if slot is None:
                    continue
            key = store.hit_key(slot)
            if key in seen:  # parts of one method, or an #Если twin: one hit
                continue
            seen.add(key)
            if len(hits) < top_k:
                c = store.get(slot)
                hits.append(chunk_hit(c, score, ranks, match.get(cid, ""), snippets, self.tests.is_test(c.path)))
        return hits, len(seen)

    def _roll_up(self, fused: list, slot_by_id: dict[str, int], allow: np.ndarray | None = None) -> list:
        """The fused ranking of a metadata question with every field's object (chunk id
        ``<path>::``) placed just above the object's first field, unless it is higher already
        or the filters (``allow``) leave it out. The object keeps its own score and channel
        ranks when it has them, else it takes its field's score. Code and docs chunks keep
        their places. Then the linked objects (:meth:`_link_objects`)."""
        store = self.state.store
        slot_of = store.slot_of
        by_id = {t[0]: t for t in fused}
        out: list = []
        placed: set[str] = set()
        for t in fused:
            cid = t[0]
            slot = slot_by_id.get(cid)
            if slot is None:
                slot = slot_of.get(cid)
            kind = store.kind_of(slot) if slot is not None else ""
            if not kind or kind in CODE_KINDS or kind in DOCS_KINDS:
                out.append(t)
                continue
            if kind != "object":
                obj = cid.split("::", 1)[0] + "::"
                oslot = slot_of.get(obj) if obj not in placed else None
                if oslot is not None and (allow is None or (oslot < len(allow) and allow[oslot])):
                    placed.add(obj)
                    out.append(by_id.get(obj) or (obj, t[1], {}))
                out.append(t)
            elif cid not in placed:
                placed.add(cid)
                out.append(t)
        return self._link_objects(out, allow) if self.params.linked_objects else out

    def _link_objects(self, ranked: list, allow: np.ndarray | None = None) -> list:
        """``ranked`` (fused ``(id, score, ranks)``) with the linked objects
        (:meth:`_object_links`) of each of its first ``link_depth`` hits placed just below it,
        at most ``link_partners`` per hit, unless they rank higher already; a linked object
        keeps its own score and ranks (it takes the object's score when no channel found it).
        ``allow``: the filters' slot mask; an object it excludes is not brought in. Each id once."""
        links = self._object_links()
        if not links:
            return ranked
        p = self.params
        allowed = self._by_id(allow)
        at = {t[0]: i for i, t in enumerate(ranked)}
        out: list = []
        placed: set[str] = set()
        for i, t in enumerate(ranked):
            if t[0] in placed:
                continue
            out.append(t)
            placed.add(t[0])
            if len(out) > p.link_depth:
                continue
            brought = 0
            for other in links.get(t[0], ()):
                if brought >= p.link_partners:
                    break
                j = at.get(other)
                if other in placed or (j is not None and j < i):
                    continue
                if j is None and allowed is not None and not allowed(other):
                    continue
                out.append(ranked[j] if j is not None else (other, t[1], {}))
                placed.add(other)
                brought += 1
        return out

    def _object_links(self) -> dict[str, tuple[str, ...]]:
        """``{object chunk id: ids of the objects linked to it}`` by :data:`LINK_PROPERTIES`,
        both directions (a functional option and its constant, a business process and its
        task), built from the descriptors' properties on first use and cached per store
        version. A reference to a field (``Catalog.X.Attribute.Y``) links the object
        ``Catalog.X``; one to an object that is not indexed links nothing."""
        from ..contract import normalize_object_type

        st = self.state
        store = st.store
        ref, version, links = self._links
        if ref is not None and ref() is store and version == (store.version, store.capacity):
            return links
        by_name: dict[str, dict[str, int]] = {}
        pairs: dict[str, set[str]] = {}
        for otype, prop in LINK_PROPERTIES.items():
            for slot in store.slots_where(kind="object", object_type=otype).tolist():
                target = store.get(slot).properties.get(prop, "").split(".")
                ttype = normalize_object_type(target[0]) if len(target) >= 2 else None
                if ttype is None:
                    continue
                if ttype not in by_name:
                    # the names channel's in-memory names: no arena page read per object
                    by_name[ttype] = {
                        st.entry_name(s): s for s in store.slots_where(kind="object", object_type=ttype).tolist()
                    }
                other = by_name[ttype].get(target[1])
                a, b = store.ids[slot], store.ids[other] if other is not None else None
                if a is None or b is None or a == b:
                    continue
                pairs.setdefault(a, set()).add(b)
                pairs.setdefault(b, set()).add(a)
        links = {k: tuple(sorted(v)) for k, v in pairs.items()}
        self._links = (weakref.ref(store), (store.version, store.capacity), links)
        return links
