"""The metadata-names channel: BM25 over the *name words* of metadata objects and fields.

"Где хранятся курсы валют", "справочник с настройками почтовых ящиков": the answer is the
object whose name says it (``РегистрСведений.КурсыВалют``), yet the metadata BM25 over the
whole descriptor (``Engine.meta_bm25``: name, synonyms, comment, field types and handlers)
also ranks objects that only refer to those words in a field type or a comment. This index
holds one short document per metadata chunk, the words of its name only (CamelCase parts,
folded and stemmed as :func:`daemon.text.tokenize.tokenize` makes them), so "the object named
after X" ranks first among the objects that mention X. The engine adds it as a channel
next to ``meta`` when the query asks about metadata (:attr:`daemon.ranking.cues.QueryCues.metadata`),
with the weights ``metanames_weight`` / ``metanames_hybrid_weight`` of
:class:`daemon.ranking.params.RankingParams` (``docs/ranking.md``).

The same object also keeps the *word families* of every method name
(:func:`daemon.text.lexicon.family` of :func:`daemon.text.lexicon.name_words`), for a name typed in the
other language: ``ObjectAttributeValue`` over Russian code is ``Значение|Реквизита|Объекта``
in any order once each word is translated (:meth:`MetadataNames.translated_names`).

A third part, :class:`ObjectWords`, holds the words of every metadata object's name and
synonyms, for the objects a question names in words ("обработка проведения документа анкета").

All parts are keyed by chunk slot (:mod:`daemon.index.chunkstore`), built from the store on first
use (the names come from each blob's uncompressed head, no chunk is materialised) and kept
current by the engine's add/remove hooks; a new store (a load, a first index swapped in)
makes them rebuild on the next use. Docs sections are in none of them (the metadata parts
read metadata chunks, the families only BSL methods).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable

import weakref

import numpy as np

from .bm25 import BM25Index
from ..contract import Chunk
from ..text.lexicon import default_lexicon, family, name_words
from ..text.tokenize import tokenize

#: BM25 parameters of this index: the usual k1 1.2, b 0.75 (names are short; the main index's
#: b 0.3 measured lower here, ``docs/ranking.md``).
K1, B = 1.2, 0.75


_WORD = re.compile(r"[^\W\d_]+")


def spelled_name(query: str) -> str | None:
    """The identifier a query spells out word by word, or None: 2 to 6 words of letters only,
    each capitalised and joined (``значение реквизита объекта`` → ``ЗначениеРеквизитаОбъекта``).
    The engine checks it against the names channel: a query that spells an existing method name
    asks for that method, not for metadata that merely shares its words (``реквизит`` is a metadata
    cue; without this the attributes named ``Значение`` outranked ``ЗначениеРеквизитаОбъекта``)."""
    words = _WORD.findall(query)
    if not 2 <= len(words) <= 6 or sum(len(w) for w in words) != len("".join(query.split())):
        return None
    return "".join(w[:1].upper() + w[1:] for w in words)


#: Families of methods added or replaced since the last build are kept in a dict beside the
#: frozen arrays; past this many such changes (or a tenth of the methods) the families are
#: rebuilt on the next use.
OVERLAY_MAX = 5000


def _name(store, slot: int, name_of: Callable[[int], str | None] | None) -> str:
    name = name_of(slot) if name_of is not None else None
    return name if name is not None else store.head(slot)[0]


class MetadataNames:
    """BM25 over the name words of metadata chunks, and the word families of method names,
    both keyed by chunk slot (see the module docstring).

    The families are numpy arrays (family -> sorted slots, CSR), one byte per slot for the
    number of words of its name, and a dict of family strings.
    """

    __slots__ = (
        "_store",
        "index",
        "_fam_ids",
        "_off",
        "_slots",
        "_nwords",
        "_over",
        "_stale",
        "objects",
        "__weakref__",
    )

    def __init__(self) -> None:
        self._store = None  # weakref to the ChunkStore the parts were built from
        self.index: BM25Index | None = None
        self._fam_ids: dict[str, int] | None = None  # family -> row of the CSR (None: families not built)
        self._off = np.zeros(1, dtype=np.int64)
        self._slots = np.zeros(0, dtype=np.int32)
        self._nwords = np.zeros(0, dtype=np.uint8)  # slot -> families of its name in the CSR (0: none)
        self._over: dict[int, frozenset[str]] = {}  # methods added since the build: slot -> families
        self._stale: set[int] = set()  # slots whose CSR postings no longer hold
        self.objects = ObjectWords()  # the words of objects' names and synonyms (built on first use)

    # ------------------------------------------------------------------ building
    def _bind(self, store) -> None:
        """Forget everything built from another store."""
        if self._store is None or self._store() is not store:
            self.reset()
            self._store = weakref.ref(store)

    def _bound(self, store) -> bool:
        return self._store is not None and self._store() is store

    @staticmethod
    def _method_slots(store) -> np.ndarray:
        """Slots of BSL methods (code chunks other than module code, first part)."""
        m = store.mask(scope="code")
        kinds = store.tables["kind"]
        mod = kinds.find("module")
        if mod >= 0:
            m &= store.col("kind") != mod
        m &= store.col("part") <= 1
        return np.flatnonzero(m)

    @staticmethod
    def tokens(name: str) -> list[str]:
        """The document of one metadata chunk: its name's words, stemmed."""
        return tokenize(name, stem=True)

    def ensure(self, store, name_of: Callable[[int], str | None] | None = None) -> BM25Index:
        """The metadata-names BM25 (keyed by slot), built from ``store`` if it is not built
        for it yet. ``name_of(slot)``: the chunk's name from an index
        that holds it in memory (the engine passes its names channel's), else None; without
        it, or for None, the name is read from the blob's head (which pages the arena in)."""
        self._bind(store)
        if self.index is None:
            idx = BM25Index(K1, B)
            for s in np.flatnonzero(store.mask(scope="metadata")).tolist():
                idx.add(s, self.tokens(_name(store, s, name_of)))
            idx.flush()
            self.index = idx
        return self.index

    def ensure_objects(self, store) -> ObjectWords:
        """The words of the metadata objects' names and synonyms (:class:`ObjectWords`), built
        from ``store`` if they are not built for it yet (reads every object's chunk)."""
        self._bind(store)
        if not self.objects.built:
            self.objects.build(store)
        return self.objects

    def ensure_families(self, store, name_of: Callable[[int], str | None] | None = None) -> None:
        """The word families of every method name in ``store``, built on first use (only a
        name typed in the other language needs them: it costs a pass over every method name).
        ``name_of``: as for :meth:`ensure`."""
        self._bind(store)
        if self._fam_ids is not None and len(self._over) + len(self._stale) <= max(
            OVERLAY_MAX, len(self._nwords) // 10
        ):
            return
        fam_ids: dict[str, int] = {}
        fid_col: list[int] = []
        slot_col: list[int] = []
        nwords = np.zeros(store.capacity, dtype=np.uint8)
        memo: dict[str, str | None] = {}  # word part -> token: each distinct part folded and stemmed once
        for s in self._method_slots(store).tolist():
            fams = {family(w) for w in name_words(_name(store, s, name_of), memo)}
            nwords[s] = min(len(fams), 255)
            for f in fams:
                fid_col.append(fam_ids.setdefault(f, len(fam_ids)))
                slot_col.append(s)
        fid = np.asarray(fid_col, dtype=np.int32)
        order = np.lexsort((np.asarray(slot_col, dtype=np.int32), fid))
        self._slots = np.asarray(slot_col, dtype=np.int32)[order]
        self._off = np.zeros(len(fam_ids) + 1, dtype=np.int64)
        np.cumsum(np.bincount(fid, minlength=len(fam_ids)), out=self._off[1:])
        self._nwords = nwords
        self._fam_ids = fam_ids
        self._over, self._stale = {}, set()

    def reset(self) -> None:
        """Forget both parts (the engine has another store); the next use rebuilds them."""
        self._store = None
        self.index = None
        self._fam_ids = None
        self._off = np.zeros(1, dtype=np.int64)
        self._slots = np.zeros(0, dtype=np.int32)
        self._nwords = np.zeros(0, dtype=np.uint8)
        self._over, self._stale = {}, set()
        self.objects = ObjectWords()

    def nbytes(self) -> int:
        """Bytes held by the families' arrays and the overlay (the BM25 part not counted)."""
        n = self._off.nbytes + self._slots.nbytes + self._nwords.nbytes
        if self._fam_ids is not None:
            n += sum(len(f) * 2 + 100 for f in self._fam_ids)  # keys, ints, dict slots (rough)
        return n + 300 * len(self._over) + 70 * len(self._stale)

    # ------------------------------------------------------------------ edits
    def add(self, store, slot: int, c: Chunk) -> None:
        """Chunk ``c`` was stored at ``slot`` of ``store`` (new or replaced): index it in the
        parts built for that store (no-op for parts not built, or built for another store)."""
        if not self._bound(store):
            return
        if self.index is not None:
            if c.is_metadata:
                self.index.add(slot, self.tokens(c.name))
            elif slot in self.index:
                self.index.remove(slot)
        if self.objects.built:
            self.objects.add(slot, c)
        if self._fam_ids is not None:
            self._drop_method(slot)
            if c.is_code and c.kind != "module" and c.part <= 1:
                self._over[slot] = frozenset(family(w) for w in name_words(c.name))

    def remove(self, store, slot: int) -> None:
        """The chunk at ``slot`` of ``store`` is gone (no-op if absent or not built)."""
        if not self._bound(store):
            return
        if self.index is not None and slot in self.index:
            self.index.remove(slot)
        if self.objects.built:
            self.objects.remove(slot)
        if self._fam_ids is not None:
            self._drop_method(slot)

    def _drop_method(self, slot: int) -> None:
        self._over.pop(slot, None)
        if slot < len(self._nwords) and self._nwords[slot]:
            self._stale.add(slot)

    # ------------------------------------------------------------------ queries
    def _family_slots(self, fams: set[str]) -> np.ndarray:
        parts = []
        for f in fams:
            i = self._fam_ids.get(f) if self._fam_ids is not None else None
            if i is not None:
                parts.append(self._slots[self._off[i] : self._off[i + 1]])
        s = np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int32)
        if self._stale and len(s):
            s = s[~np.isin(s, np.fromiter(self._stale, dtype=np.int64, count=len(self._stale)))]
        return s

    def translated_names(
        self,
        store,
        name: str,
        to: str,
        k: int,
        allow: np.ndarray | None = None,
        boost: Callable[[int], float] | None = None,
        name_of: Callable[[int], str | None] | None = None,
    ) -> list[int]:
        """Methods whose name is ``name`` (an identifier) in the other language: every word of
        ``name`` is translated (:func:`daemon.text.lexicon.default_lexicon`, into ``to``) and must
        meet a word family of the method's name. Names with no other words come first, then by
        the number of extra words, then by ``boost(slot)`` (higher first; the engine passes
        its canonical-API boost), then by chunk id. A word without a translation, or a
        one-word name, gives ``[]`` (one word alone would match thousands of names).
        Returns at most ``k`` slots of ``store`` that the bool mask ``allow`` accepts.
        ``name_of``: as for :meth:`ensure`."""
        words = list(dict.fromkeys(name_words(name)))
        if len(words) < 2:
            return []
        lex = default_lexicon()
        wanted: list[set[str]] = []
        for w in words:
            fams = {family(t) for t in lex.translate([w], to)}
            if not fams:
                return []
            wanted.append(fams)
        self.ensure_families(store, name_of)
        cand: np.ndarray | None = None
        extra: dict[int, int] = {}
        for fams in wanted:
            s = self._family_slots(fams)
            cand = s if cand is None else np.intersect1d(cand, s, assume_unique=True)
        for slot in cand.tolist() if cand is not None else []:
            extra[slot] = int(self._nwords[slot]) - len(wanted)
        for slot, fams in self._over.items():
            if all(fams & w for w in wanted):
                extra[slot] = len(fams) - len(wanted)
        if allow is not None:
            extra = {s: e for s, e in extra.items() if s < len(allow) and allow[s]}
        ids = store.ids
        ranked = sorted(extra, key=lambda s: (extra[s], -(boost(s) if boost else 0.0), ids[s] or ""))
        return ranked[:k]

    def search(
        self,
        store,
        query_tokens: list[str],
        k: int,
        allow: np.ndarray | None,
        name_of: Callable[[int], str | None] | None = None,
    ) -> list[int]:
        """Slots of the best ``k`` metadata chunks of ``store`` for ``query_tokens`` (index
        tokens of the query, stemmed), best first (ties by chunk id), within the bool mask
        ``allow``. ``name_of``: as for :meth:`ensure`."""
        return [s for s, _ in self.ensure(store, name_of).search(query_tokens, k, allow=allow, key_of=store.ids)]


def field_path(name: str, symbol: str | None) -> str:
    """A field's name with the tabular section it belongs to (``КонтактныеЛица.Телефон`` for
    the symbol ``Реквизит:КонтактныеЛица.Телефон``), else its name."""
    path = symbol.partition(":")[2] if symbol else ""
    return path or name


class ObjectWords:
    """The words of every metadata object's name and of each of its synonyms (index tokens of
    :func:`daemon.text.lexicon.name_words`: split, folded, stemmed, no function words), for the
    objects a question names in words ("документ анкета", "регистр курсов валют", "данные о
    пользователях"). Keyed by the object chunk's slot; built from the store on first use (each
    object's chunk is read for its synonyms), then kept current chunk by chunk through
    :meth:`add` and :meth:`remove` (the reconcile's hooks of :class:`MetadataNames`), so that
    after any edits it equals a build from scratch (:meth:`state`).

    ``_objects``: slot -> (owner ``Тип.Имя``, object type, word sets of the name and of each
    distinct synonym); ``_by_word``: word -> slots of the objects that have it in a form;
    ``_fields``: slot of a field (attribute, tabular section, dimension, ...) -> (its object's
    owner, the words of its name, those with its tabular section's: :func:`field_path`);
    ``_fields_of``: owner -> slots of its fields.
    """

    __slots__ = ("_objects", "_by_word", "_fields", "_fields_of", "_vocab", "_sorted", "built")

    def __init__(self) -> None:
        self._objects: dict[int, tuple[str, str, tuple[frozenset[str], ...]]] = {}
        self._by_word: dict[str, set[int]] = {}
        self._fields: dict[int, tuple[str, frozenset[str], frozenset[str]]] = {}
        self._fields_of: dict[str, set[int]] = {}
        self._vocab: dict[str, int] = {}  # word -> how many objects' and fields' word sets hold it
        self._sorted: list[str] | None = None  # the vocabulary, sorted (None: to sort on next use)
        self.built = False

    def _count(self, words, delta: int) -> None:
        for w in words:
            n = self._vocab.get(w, 0) + delta
            if n > 0:
                if w not in self._vocab:
                    self._sorted = None
                self._vocab[w] = n
            else:
                self._vocab.pop(w, None)
                self._sorted = None

    def expand(self, tokens: set[str], min_len: int = 4, extra: int = 3) -> set[str]:
        """``tokens`` and the words of names that are the same word stemmed differently: one a
        prefix of the other, the shorter of at least ``min_len`` letters, the longer at most
        ``extra`` letters longer (the Snowball stems of "профиле" and "Профили" are ``профил``
        and ``проф``; ``верс`` does not reach ``версионирован``)."""
        if self._sorted is None:
            self._sorted = sorted(self._vocab)
        out = set(tokens)
        vocab = self._sorted
        for t in tokens:
            if len(t) < min_len:
                continue
            out.update(t[:n] for n in range(max(min_len, len(t) - extra), len(t)) if t[:n] in self._vocab)
            i = bisect.bisect_left(vocab, t)
            while i < len(vocab) and vocab[i].startswith(t):
                if len(vocab[i]) - len(t) <= extra:
                    out.add(vocab[i])
                i += 1
        return out

    @staticmethod
    def forms(c: Chunk, memo: dict[str, str | None] | None = None) -> tuple[frozenset[str], ...]:
        """The word sets of the object chunk ``c``: its name's first, then each synonym's that
        differs (empty sets left out)."""
        out = [frozenset(name_words(c.name, memo))]
        for syn in c.synonym.values():
            w = frozenset(name_words(syn, memo))
            if w not in out:
                out.append(w)
        return tuple(f for f in out if f)

    def build(self, store) -> None:
        """Index every object and field chunk of ``store`` (forgetting what was indexed before);
        a field's name and owner are read without materialising its chunk."""
        self._objects, self._by_word, self._fields, self._fields_of = {}, {}, {}, {}
        self._vocab, self._sorted = {}, None
        memo: dict[str, str | None] = {}
        objects = store.slots_where(kind="object")
        for s in objects.tolist():
            self._put(s, store.get(s), memo)
        fields = np.flatnonzero(store.mask(scope="metadata"))
        fields = fields[~np.isin(fields, objects)]
        owner_names = store.tables["owner"].values
        for s, o in zip(fields.tolist(), store.col("owner")[fields].tolist(), strict=True):
            name, symbol = store.head(s)
            self._put_field(s, owner_names[o], name, field_path(name, symbol), memo)
        self.built = True

    def _put_field(
        self, slot: int, owner: str, name: str, path: str, memo: dict[str, str | None] | None = None
    ) -> None:
        words = frozenset(name_words(name, memo))
        if words and owner:
            full = frozenset(name_words(path, memo)) if path != name else words
            self._fields[slot] = (owner, words, full)
            self._fields_of.setdefault(owner, set()).add(slot)
            self._count(full, 1)

    def _put(self, slot: int, c: Chunk, memo: dict[str, str | None] | None = None) -> None:
        forms = self.forms(c, memo)
        if not forms:
            return
        self._objects[slot] = (c.owner, c.object_type, forms)
        for w in set().union(*forms):
            self._by_word.setdefault(w, set()).add(slot)
        self._count(set().union(*forms), 1)

    def add(self, slot: int, c: Chunk) -> None:
        """Chunk ``c`` was stored at ``slot`` (new or replaced)."""
        self.remove(slot)
        if c.kind == "object" and c.is_metadata:
            self._put(slot, c)
        elif c.is_metadata:
            self._put_field(slot, c.owner, c.name, field_path(c.name, c.symbol))

    def remove(self, slot: int) -> None:
        """The chunk at ``slot`` is gone (no-op for a slot that holds no object or field)."""
        field = self._fields.pop(slot, None)
        if field is not None:
            slots = self._fields_of[field[0]]
            slots.discard(slot)
            if not slots:
                del self._fields_of[field[0]]
            self._count(field[2], -1)
        old = self._objects.pop(slot, None)
        if old is None:
            return
        self._count(set().union(*old[2]), -1)
        for w in set().union(*old[2]):
            slots = self._by_word.get(w)
            if slots is not None:
                slots.discard(slot)
                if not slots:
                    del self._by_word[w]

    def state(self) -> tuple[dict, dict, dict, dict, dict]:
        """Everything indexed, as plain values (for comparing two builds)."""
        return (
            dict(self._objects),
            {w: frozenset(s) for w, s in self._by_word.items()},
            dict(self._fields),
            {o: frozenset(s) for o, s in self._fields_of.items()},
            dict(self._vocab),
        )

    def fields(self, owner: str, tokens: set[str]) -> list[tuple[int, frozenset[str]]]:
        """``[(slot, words)]`` of the fields of object ``owner`` all of whose name words are
        among ``tokens``; ``words``: those of the field with its tabular section's
        (:func:`field_path`) when the tokens hold them too, else its own. Most words first, then
        by slot."""
        out = []
        for s in self._fields_of.get(owner, ()):
            _, words, full = self._fields[s]
            if words <= tokens:
                out.append((s, full if full <= tokens else words))
        out.sort(key=lambda t: (-len(t[1]), t[0]))
        return out

    def words(self, slot: int) -> frozenset[str] | None:
        """The words of the name of the object at ``slot`` (None: no object indexed there)."""
        o = self._objects.get(slot)
        return o[2][0] if o is not None else None

    def owner(self, slot: int) -> str:
        """``Тип.Имя`` of the object at ``slot`` (``""``: none)."""
        o = self._objects.get(slot)
        return o[0] if o is not None else ""

    def named(self, tokens: set[str], types: tuple[str, ...] | None) -> list[tuple[int, str, int]]:
        """``[(slot, owner, words)]`` of the objects (of ``types``; None: any) all of whose
        name words, or all of the words of one synonym, are among ``tokens``; ``words``: how
        many words the best such form has. An object whose matched words are a proper subset
        of another named object's is left out ("курсы валют" names ``КурсыВалют``, not
        ``Валюты``). Most words first, then by slot."""
        found = []
        for s in sorted({s for w in tokens for s in self._by_word.get(w, ())}):
            owner, otype, forms = self._objects[s]
            if types is not None and otype not in types:
                continue
            best = max((f for f in forms if f <= tokens), key=len, default=None)
            if best:
                found.append((s, owner, best))
        out = [(s, owner, len(f)) for s, owner, f in found if not any(f < g for _, _, g in found)]
        out.sort(key=lambda t: (-t[2], t[0]))
        return out
