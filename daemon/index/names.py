"""The symbol-name channel: what a developer types into editor symbol search.

:class:`SymbolIndex` matches a query against method and metadata names, and for qualified
queries (``Модуль.Метод``, ``Справочник.Пользователи``) also against the *containers* a name
lives in. Match kinds, best first (the forms a developer types into symbol search):

``exact``
    the folded name equals the folded query (case- and ``ё``-insensitive, :func:`daemon.text.folding.fold`);
``prefix``
    the folded name starts with the folded query (``ЗначениеРеквиз``);
``camelhump``
    the query has two or more humps (split before each capital letter and digit run:
    ``ЗнРекОб`` → ``Зн|Рек|Об``, ``ГСП`` → ``Г|С|П``) and hump *i* is a prefix of word *i* of the
    name, from the first word on (``ЗначениеРеквизитаОбъекта``, ``ЗначенияРеквизитовОбъектов``,
    ``ГлобальнаяСервернаяПроцедура``). Name words are split the same way (``ОтправитьSMS`` →
    ``Отправить|S|M|S``) or, alternatively, by :func:`daemon.text.folding.split_words` (acronyms whole:
    ``HTTP|Запрос``), so ``ОтпрSMS`` and ``HttpЗап`` both match. Looser subsequence matches are
    deliberately not produced (the gold set does not count them as relevant);
``substring``
    the folded query (3 characters or more) occurs inside the folded name. Only searched when the
    kinds above give fewer than ``k`` results.

Qualified queries ``<container>.<name>`` (split at the last dot): the container part must match
one of the entry's containers exactly, as a prefix or as CamelHump; the name part is matched as
above, and an empty name part (``ОбщегоНазначения.``) lists the container. Qualified matches
come first; after them, to fill ``k``, the name part alone (so the counterpart module's
same-named method still shows, below).

Ranking: qualified matches first; then the match kind; for qualified matches the container's
kind; then, inside one kind, the entry's ``boost`` (higher first: the caller's estimate that
this is the canonical public API, see :func:`api_boost`), then the shorter name, the shorter
key, the key. The kind always wins over the boost, as an editor user expects (an exact name
first), even where the gold set prefers a public API of a longer name.

Entries are named by the caller's **slots** (one integer per chunk, shared by every channel,
assigned by the chunk store; a freed slot may return with another chunk). The index
keeps no chunk id strings: the "shorter key, then key" tie-breaks ask ``key_of(slot)`` at
search time (only for the batch being sorted), filters are a bool mask indexed by slot.

Data structures (n entries, columns indexed by an internal entry id, with ``slot <-> entry``
as two ``array`` columns): names, folded names and the two word signatures are each ONE
``str`` plus ``array('I')`` offsets (:class:`_StrCol`, no per-entry ``str``); kinds, word
initials, folded containers and container tuples are ``uint32`` ids into small tables of
distinct values (:class:`_Interned`). Ids sorted by folded name in an ``array('q')``
(``bisect`` with a key function, so no text is duplicated) for exact and prefix,
O(log n + matches); ids sorted by word initials for CamelHump (``ЗнРекОб`` looks up the
initials prefix ``зро``, or the names starting with ``зн`` if those are fewer, and verifies
the candidates); the same two for containers; trigram postings of the folded names for
substrings (candidates from the rarest trigrams, verified). Additions are buffered and merged
before the next search (one sort for a bulk load, ``insort``-like inserts for a few; the
trigrams of a bulk load in one numpy pass over the code points); removals mark the id dead
(searches skip it) and the index rebuilds itself compactly when dead ids exceed half the
live ones. :meth:`SymbolIndex.save` writes those columns as files and
:meth:`SymbolIndex.load` reads them back with no per-entry work (one decode per text column).

Not thread-safe: the daemon serialises calls. Build, load and search costs: ``docs/ranking.md``
("Names channel costs").
"""

from __future__ import annotations

import math
import re
from array import array
from itertools import compress
from operator import itemgetter
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence

import json
import operator
import os
import zlib
from pathlib import Path

import msgspec
import numpy as np

from .storage import save_npy_synced

from daemon.text.folding import fold, split_words

__all__ = [
    "MATCH_KINDS",
    "SymbolError",
    "SymbolIndex",
    "SymbolState",
    "api_boost",
    "humps",
    "is_acronym",
    "is_identifier_query",
]

#: Match kinds, best first. An acronym query also has ``part`` (the acronym is a word of the
#: name, ``СуммаНДС`` for ``НДС``), between prefix and camelhump (:data:`EMIT_KINDS`).
MATCH_KINDS = ("exact", "prefix", "camelhump", "substring")
#: The kinds by their rank in the search (index 4: the acronym's word-part tier).
EMIT_KINDS = (*MATCH_KINDS, "part")
#: Base score per kind; the returned score is base + boost term (see ``SymbolIndex.search``).
_KIND_BASE = {"exact": 40.0, "prefix": 30.0, "camelhump": 20.0, "substring": 10.0, "part": 25.0}
#: An acronym query: 2 to 8 capital letters (``НДС``, ``ИНН``, ``XML``, ``ФИАС``).
_ACRONYM_RE = re.compile(r"[A-ZА-ЯЁ]{2,8}")
#: Qualified queries: results that match the name part but not the container sit this much lower.
_UNQUALIFIED_PENALTY = 40.0

#: Substring scan: minimum query length and the most matches collected.
SUBSTRING_MIN_LEN = 3
SUBSTRING_MAX_HITS = 1000

_UPPER = "A-ZА-ЯЁ"
# Humps: a capital followed by non-capital letters, a run of non-capital letters (a lowercase
# start), or a digit run. "_" and other non-word characters separate.
_HUMP_RE = re.compile(rf"[{_UPPER}][^\W\d_{_UPPER}]*|[^\W\d_{_UPPER}]+|\d+")
_IDENT_RE = re.compile(r"[^\W\d]\w*(?:\.[^\W\d]\w*)*\.?")


def is_acronym(query: str) -> bool:
    """True for a query of 2 to 8 capital letters and nothing else (``НДС``, ``ФИАС``): it is
    first a word of names and texts, then a CamelHump abbreviation."""
    return _ACRONYM_RE.fullmatch(query.strip()) is not None


def humps(text: str) -> list[str]:
    """Split at every capital letter and digit run, folded: ``"ЗнРекОб"`` →
    ``["зн", "рек", "об"]``, ``"ГСП"`` → ``["г", "с", "п"]``, ``"ОтправитьSMS"`` →
    ``["отправить", "s", "m", "s"]``; ``"знрекоб"`` → ``["знрекоб"]``."""
    return [fold(h) for h in _HUMP_RE.findall(text)]


class _FoldCache(dict):
    """word -> fold(word); words repeat across names (``Получить``, ``Объекта`` ...), and a
    hit stays in C (``map`` over ``__getitem__``). Dropped when it exceeds 65,536 words."""

    def __missing__(self, word: str) -> str:
        if len(self) >= 1 << 16:
            self.clear()
        f = self[word] = fold(word)
        return f


_FOLDED = _FoldCache()
_first = itemgetter(slice(0, 1))


def _word_splits(name: str) -> tuple[tuple[str, ...], ...]:
    """The name's word sequences for CamelHump matching (one or two distinct splittings)."""
    a = tuple(map(_FOLDED.__getitem__, _HUMP_RE.findall(name)))
    b = tuple(map(_FOLDED.__getitem__, split_words(name)))
    return (a,) if a == b or not b else (a, b)


def _initials(words: tuple[str, ...]) -> str:
    return "".join(map(_first, words))


def _clean_query(query: str) -> str:
    q = query.strip()
    if q.endswith("()"):
        q = q[:-2].rstrip()
    elif q.endswith("("):
        q = q[:-1].rstrip()
    return q


def is_identifier_query(query: str) -> bool:
    """True when ``query`` looks like a name rather than natural language.

    A name is one token of letters, digits and ``_`` that does not start with a digit,
    optionally dotted (``Модуль.Метод``, ``Справочник.Пользователи``, also with an empty or
    incomplete last part: ``ОбщегоНазначения.``), optionally followed by ``()``; surrounding
    whitespace is ignored. Anything with inner whitespace (``отправить письмо``), other
    punctuation (``НФ-001``, ``a+b``) or a leading digit (``1С``) is not.

    >>> is_identifier_query("ЗнРекОб"), is_identifier_query(" ОбщегоНазначения.ЗначениеРекв ")
    (True, True)
    >>> is_identifier_query("как отправить письмо"), is_identifier_query("")
    (False, False)
    """
    return _IDENT_RE.fullmatch(_clean_query(query)) is not None


def api_boost(
    *,
    export: bool,
    module_kind: str,
    owner: str = "",
    region: Sequence[str] = (),
    references: int = 0,
) -> float:
    """Reference ranking boost for a *method* entry: how likely it is the canonical public API.

    What the dev gold set rewards for symbol queries (the public API first, then internal
    implementations, hooks and deprecated copies, then private copies and form procedures),
    written as SSL's own conventions. Additive, in [-1.5, 4 + 0.25·ln(1+refs)]:

    * ``+1`` exported (``Экспорт``): non-exported methods are private helpers or copies;
    * ``+1`` in a common module (``module_kind == "common"``); ``+0.5`` in a manager, object,
      record-set or value-manager module; ``0`` elsewhere (forms, commands, application modules);
    * ``+1`` the module name (the part of ``owner`` after the first dot) has none of the
      non-API suffixes of SSL's module naming rules: ``Служебный``/``Internal``,
      ``ВызовСервера``/``ServerCall``, ``Переопределяемый``/``Overridable``,
      ``ПовтИсп``/``Cached``, ``События``/``Events``, ``Локализация``/``Localization``;
    * ``+1`` the outermost ``#Область`` is ``ПрограммныйИнтерфейс``/``Public`` (SSL's declared
      program interface; ``region`` is ``Chunk.region``, outermost first);
    * ``-1.5`` inside ``УстаревшиеПроцедурыИФункции``/``ObsoleteProceduresAndFunctions``
      (deprecated API);
    * ``+0.25·ln(1 + references)``, ``references`` = how often the corpus calls it qualified
      (the canonical API is the one everybody calls; the engine passes none today).

    The boost is stored in the names channel when a chunk is indexed (a change of these
    numbers needs a rebuild), which is why they are not ranking parameters; how they were
    measured: ``docs/ranking.md``, "The names channel's API boost". Metadata entries need no
    boost (pass 0): their exact names rarely collide.
    """
    boost = 0.0
    if export:
        boost += 1.0
    if module_kind == "common":
        boost += 1.0
    elif module_kind in ("manager", "object", "recordset", "value_manager"):
        boost += 0.5
    module = owner.split(".", 1)[1] if "." in owner else owner
    if not _INTERNAL_SUFFIX_RE.search(module):
        boost += 1.0
    if region and region[0] in ("ПрограммныйИнтерфейс", "Public"):
        boost += 1.0
    if any(r in ("УстаревшиеПроцедурыИФункции", "ObsoleteProceduresAndFunctions") for r in region):
        boost -= 1.5
    if references > 0:
        boost += 0.25 * math.log1p(references)
    return boost


_INTERNAL_SUFFIX_RE = re.compile(
    r"(?:Служебный|Internal|ВызовСервера|ServerCall|Переопределяемый|Overridable|"
    r"ПовтИсп|Cached|События|Events|Локализация|Localization)",
)


#: Layout of :class:`SymbolState`; :meth:`SymbolIndex.from_state` rejects any other.
STATE_LAYOUT = 2


class SymbolState(msgspec.Struct, frozen=True):
    """Persisted form of a :class:`SymbolIndex`: one row per live entry, insertion order.

    Besides the entries themselves (``keys`` .. ``boosts``) it carries what the index derives
    from them, so that loading does no per-name work: the folded names, word signatures and
    initials, the four sorted id arrays and the trigram postings (``<u4``/``<i4`` bytes, ids
    and rows renumbered to the live entries). ``layout`` is :data:`STATE_LAYOUT`; a state of
    an older layout (without these fields) decodes with ``layout == 0`` and is rejected by
    :meth:`SymbolIndex.from_state` with ``ValueError``, so the owner rebuilds it.
    """

    keys: list[str]  # always []: string keys were a compatibility path, removed (the slots say whose entry)
    names: list[str]
    containers: list[list[str]]
    kinds: list[str]
    boosts: list[float]
    layout: int = 0
    fnames: list[str] = []
    sigs: list[str] = []
    sigs2: list[str | None] = []
    inis: list[str] = []  # initials row 2*i (of sigs)
    inis2: list[str | None] = []  # initials row 2*i+1 (of sigs2, when they differ)
    by_name: bytes = b""  # <u4 ids sorted by folded name
    by_ini: bytes = b""  # <u4 initials rows sorted by initials
    by_cont: bytes = b""  # <u4 container rows sorted by folded container
    by_cini: bytes = b""  # <u4 container-initials rows sorted by initials
    tri_terms: list[str] = []
    tri_offsets: bytes = b""  # <u4[len(tri_terms) + 1]
    tri_ids: bytes = b""  # <i4 ids, ascending per trigram
    slots: bytes = b""  # <u4 slot per entry (empty: slots 0..n-1)


def _signature(words: tuple[str, ...]) -> str:
    return "\x00".join(words)


def _hump_regex(q_humps: list[str]) -> re.Pattern[str]:
    """Matches a word signature whose word *i* starts with hump *i*, from the first word on."""
    body = "[^\x00]*\x00".join(re.escape(h) for h in q_humps)
    return re.compile(body)


def _hump_matcher(q_humps: list[str], n_candidates: int) -> Callable[[str], bool]:
    """A predicate on word signatures: a compiled regex for many candidates, a plain
    ``startswith`` loop for a few (compiling the regex costs more than checking a few names)."""
    if n_candidates > 64:
        rx = _hump_regex(q_humps).match
        return lambda sig: rx(sig) is not None
    n = len(q_humps)

    def check(sig: str) -> bool:
        words = sig.split("\x00", n)
        return len(words) >= n and all(words[i].startswith(h) for i, h in enumerate(q_humps))

    return check


class _StrCol:
    """A column of strings indexed by entry id, held as ONE ``str`` plus ``array('I')``
    character offsets (no per-entry ``str`` object and list slot) and a list *tail* of strings
    appended since the last
    :meth:`freeze`. ``col[i]`` slices out a new ``str``. With ``none_empty`` an empty string
    stands for None (the optional second word signature)."""

    __slots__ = ("big", "nf", "none_empty", "off", "tail")

    def __init__(self, none_empty: bool = False) -> None:
        self.big = ""
        self.off = array("I", [0])
        self.nf = 0
        self.tail: list[str] = []
        self.none_empty = none_empty

    def __len__(self) -> int:
        return self.nf + len(self.tail)

    def __getitem__(self, i: int):  # -> str (or None, see none_empty)
        if i < self.nf:
            off = self.off
            v = self.big[off[i] : off[i + 1]]
        else:
            v = self.tail[i - self.nf]
        return None if self.none_empty and not v else v

    def __iter__(self) -> Iterator:
        return map(self.__getitem__, range(len(self)))

    def take(self, ids: list[int]) -> list:
        """``[col[i] for i in ids]`` without a method call per row (the search loops)."""
        big, off, nf, tail = self.big, self.off, self.nf, self.tail
        if tail:
            out = [big[off[i] : off[i + 1]] if i < nf else tail[i - nf] for i in ids]
        else:
            out = [big[off[i] : off[i + 1]] for i in ids]
        return [v or None for v in out] if self.none_empty else out

    def nonempty(self, ids: np.ndarray) -> np.ndarray:
        """``bool[len(ids)]``: True where ``col[i]`` is a non-empty string (not None), from
        the offsets alone (no string is sliced)."""
        ids = np.asarray(ids, dtype=np.int64)
        off = np.frombuffer(self.off, dtype=np.uint32)
        out = np.zeros(ids.size, dtype=bool)
        frozen = ids < self.nf
        f = ids[frozen]
        out[frozen] = off[f + 1] > off[f]
        if not frozen.all():
            tail = self.tail
            out[~frozen] = [bool(tail[i - self.nf]) for i in ids[~frozen].tolist()]
        return out

    def append(self, v: str | None) -> None:
        self.tail.append(v or "")
        if len(self.tail) >= max(4096, self.nf >> 3):
            self.freeze()

    def extend(self, values: Iterable[str | None]) -> None:
        self.tail.extend(v or "" for v in values)
        self.freeze()

    def freeze(self) -> None:
        """Move the tail into the big string (O(total length); :meth:`append` does it when
        the tail exceeds 1/8 of the frozen part, so appends stay amortised O(1))."""
        tail = self.tail
        if not tail:
            return
        ends = np.cumsum(np.fromiter(map(len, tail), dtype=np.int64, count=len(tail))) + self.off[-1]
        if ends.size and int(ends[-1]) >= 1 << 32:
            raise ValueError("symbol string column exceeds 4 G characters")
        self.off.frombytes(ends.astype(np.uint32).tobytes())
        self.big += "".join(tail)
        self.nf += len(tail)
        self.tail = []


class _Interned:
    """A column of repeated values (kinds, initials, folded containers, container tuples):
    per row a ``uint32`` id into a table of distinct values (id 0 is None), and ``vals``, the
    row's value as a list slot (a reference to the table's one copy: what the search loops and
    ``bisect`` read at C speed). 12 bytes a row; a load builds no per-row object."""

    __slots__ = ("ids", "index", "table", "vals")

    def __init__(self) -> None:
        self.table: list = [None]
        self.index: dict = {}
        self.ids = array("I")
        self.vals: list = []

    def id_of(self, v: object) -> int:
        if v is None:
            return 0
        i = self.index.get(v)
        if i is None:
            i = self.index[v] = len(self.table)
            self.table.append(v)
        return i

    def append(self, v: object) -> None:
        i = self.id_of(v)
        self.ids.append(i)
        self.vals.append(self.table[i])

    def __getitem__(self, r: int):  # -> the value (str, tuple or None)
        return self.vals[r]

    def __len__(self) -> int:
        return len(self.ids)

    def __iter__(self) -> Iterator:
        return iter(self.vals)


class _SortedIds:
    """Ids sorted by ``text[id]`` (an ``array('q')``), with buffered inserts.

    ``text`` is a list owned by the index and indexed by id; bisect compares through it
    (``key=``), so no text is duplicated here.
    """

    __slots__ = ("ids", "pending", "text")

    def __init__(self, text: list | _StrCol | _Interned) -> None:
        self.ids = array("q")
        self.pending: list[int] = []
        self.text = text

    def flush(self) -> None:
        if not self.pending:
            return
        get = self.text.__getitem__
        if len(self.pending) <= 64:
            for i in self.pending:
                self.ids.insert(bisect_right(self.ids, get(i), key=get), i)
        else:
            merged = self.ids.tolist() + self.pending
            merged.sort(key=get)
            self.ids = array("q", merged)
        self.pending.clear()

    def prefix_range(self, prefix: str) -> tuple[int, int]:
        """Positions ``[lo, hi)`` of ids whose text starts with ``prefix``."""
        get = self.text.__getitem__
        lo = bisect_left(self.ids, prefix, key=get)
        if not prefix:
            return lo, len(self.ids)
        if ord(prefix[-1]) >= 0x10FFFF:
            return lo, bisect_right(self.ids, prefix + "\U0010ffff", lo, key=get)
        upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        return lo, bisect_left(self.ids, upper, lo, key=get)

    def exact_end(self, text: str, lo: int, hi: int) -> int:
        """End of the run of ids whose text equals ``text``, starting at ``lo``."""
        return bisect_right(self.ids, text, lo, hi, key=self.text.__getitem__)

    def view(self, lo: int, hi: int) -> np.ndarray:
        return np.frombuffer(self.ids, dtype=np.int64)[lo:hi].copy()


#: Boosts are compared at this resolution (so the rank fits one int64, see ``_composite``).
BOOST_RESOLUTION = 1e-3


def _composite(boost: float, name_len: int) -> int:
    """One int64 ordering entries inside a match kind: boost descending (at
    :data:`BOOST_RESOLUTION`), then shorter name (ties: shorter key, then key, compared at
    search time through ``key_of``)."""
    b = max(-(1 << 30), min(1 << 30, round(boost / BOOST_RESOLUTION)))
    return (((1 << 30) - b) << 28) | (min(name_len, 4095) << 16)


class SymbolError(ValueError):
    """Saved names that cannot be used (missing, damaged, another layout); the message
    names the folder. The owner logs it and rebuilds."""


def _checked_state(state: SymbolState) -> tuple:
    """``(slots, boosts, by_name, by_ini, tri_off, tri_ids)`` of ``state`` as arrays, after
    checking that they fit its entries; ``ValueError`` if they do not."""
    n = len(state.names)
    if state.layout != STATE_LAYOUT:
        raise ValueError(f"symbol state has layout {state.layout}, expected {STATE_LAYOUT}")
    slots = _u4(state.slots) if state.slots else np.arange(n, dtype=np.uint32)
    if slots.size != n or (n and (int(slots.max()) >= 1 << 31 or np.unique(slots).size != n)):
        raise ValueError("symbol state is inconsistent (slots)")
    columns = (
        state.names, state.containers, state.kinds, state.boosts,
        state.fnames, state.sigs, state.sigs2, state.inis, state.inis2,
    )  # fmt: skip
    if any(len(c) != n for c in columns):
        raise ValueError("symbol state is inconsistent (column lengths differ)")
    if state.keys and len(set(state.keys)) != n:
        raise ValueError("symbol state is inconsistent (duplicate keys)")
    if not all(state.names):
        raise ValueError("symbol state is inconsistent (empty name)")
    boosts = np.asarray(state.boosts, dtype=np.float64)
    if not np.isfinite(boosts).all():
        raise ValueError("symbol state is inconsistent (non-finite boost)")
    by_name = _u4(state.by_name)
    by_ini = _u4(state.by_ini)
    ini_rows = np.ones(2 * n, dtype=bool)
    ini_rows[1::2] = np.fromiter((x is not None for x in state.inis2), dtype=bool, count=n)
    if not _is_permutation(by_name, np.ones(n, dtype=bool)) or not _is_permutation(by_ini, ini_rows):
        raise ValueError("symbol state is inconsistent (sorted name or initials ids)")
    tri_off = _u4(state.tri_offsets).astype(np.int64)
    tri_ids = np.frombuffer(state.tri_ids, dtype="<i4") if len(state.tri_ids) % 4 == 0 else None
    if (
        tri_ids is None
        or tri_off.size != len(state.tri_terms) + 1
        or tri_off[0] != 0
        or np.any(np.diff(tri_off) < 0)
        or tri_off[-1] != tri_ids.size
        or (tri_ids.size and (tri_ids.min() < 0 or tri_ids.max() >= n))
    ):
        raise ValueError("symbol state is inconsistent (trigram postings)")
    return slots, boosts, by_name, by_ini, tri_off, tri_ids


def _in_range(a: np.ndarray, hi: int) -> bool:
    """True if every value of ``a`` is in ``[0, hi)``."""
    return not a.size or (int(a.min()) >= 0 and int(a.max()) < hi)


class _ColumnFiles:
    """The column files of a saved names index: ``header.json`` checked, each ``.npy`` loaded
    (memory-mapped with ``mmap``; its CRC-32 checked with ``verify``). ``SymbolError`` for a
    missing or damaged file."""

    def __init__(self, folder: Path, mmap: bool, verify: bool) -> None:
        self.folder = folder
        try:
            with open(folder / _HEADER, encoding="utf-8") as fh:
                header = json.load(fh)
        except (OSError, ValueError) as exc:
            raise SymbolError(f"names index in {folder}: cannot read {_HEADER}: {exc}") from exc
        if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("layout") != STATE_LAYOUT:
            raise SymbolError(f"names index in {folder}: not format {FORMAT} layout {STATE_LAYOUT}")
        self.counts, files = header["counts"], header["files"]
        self.n = int(self.counts["entries"])
        self.cols: dict[str, np.ndarray] = {}
        for name, meta in files.items():
            path = folder / f"{name}.npy"
            size = path.stat().st_size
            if size != int(meta["bytes"]):
                raise SymbolError(f"names index in {folder}: {path.name} has {size} bytes, header says {meta['bytes']}")
            arr = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
            if arr.ndim != 1:
                raise SymbolError(f"names index in {folder}: {path.name} is not one-dimensional")
            if verify and zlib.crc32(np.ascontiguousarray(arr).view(np.uint8)) != int(meta["crc32"]):
                raise SymbolError(f"names index in {folder}: {path.name} fails its CRC-32")
            self.cols[name] = arr

    def bad(self, what: str) -> SymbolError:
        return SymbolError(f"names index in {self.folder}: inconsistent {what}")

    def arr(self, name: str, dtype: str, size: int | None = None) -> np.ndarray:
        """Column ``name``; ``SymbolError`` unless it is of ``dtype`` (and ``size``)."""
        a = self.cols[name]
        if a.dtype != np.dtype(dtype) or (size is not None and a.size != size):
            raise self.bad(f"{name} ({a.dtype}[{a.size}])")
        return a


class SymbolIndex:
    """Name index over entries ``slot → (name, containers, kind, boost)``; see the module doc.
    Keyed by the chunk store's slots only (a string key is a ``TypeError``)."""

    def __init__(self) -> None:
        self._init()

    def _init(self) -> None:
        # columns, indexed by entry id (ids are never reused until a purge renumbers them)
        self._slot = array("I")  # entry id -> slot
        self._eid_of = array("i")  # slot -> live entry id (-1: none)
        self._n_live = 0
        self._names = _StrCol()
        self._fnames = _StrCol()
        self._sigs = _StrCol()  # folded words joined by \x00 (capital split)
        self._sigs2 = _StrCol(none_empty=True)  # the split_words splitting, when it differs
        self._conts = _Interned()  # entry -> tuple of containers
        self._kinds = _Interned()
        self._boosts = array("d")
        self._comp = array("q")
        self._alive = bytearray()
        # initials rows: row 2*id from _sigs, 2*id+1 from _sigs2 (absent rows never inserted)
        self._ini_text = _Interned()
        # container rows
        self._crow_text = _Interned()  # folded container
        self._crow_eid = array("q")
        self._cini_text = _Interned()  # initials of a container splitting
        self._cini_eid = array("q")
        self._by_name = _SortedIds(self._fnames)
        self._by_ini = _SortedIds(self._ini_text.vals)
        self._by_cont = _SortedIds(self._crow_text.vals)
        self._by_cini = _SortedIds(self._cini_text.vals)
        self._dead = 0
        self._allow_ids: Callable[[np.ndarray], np.ndarray] | None = None  # set per search
        self._key_of: Callable[[int], str] | None = None  # set per search
        self._intern: dict[str, str] = {}
        self._cont_cache: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {}
        # substring search: trigram of the folded name -> ids (ascending, may hold stale ids);
        # ids added since the last flush are indexed by the next _flush
        self._tri: dict[str, array] = {}
        self._tri_pending: list[int] = []

    # --- size ----------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._n_live

    def _eid(self, slot: int) -> int:
        eo = self._eid_of
        return eo[slot] if 0 <= slot < len(eo) else -1

    def _slot_for(self, key: object, create: bool = False) -> int:
        """Slot of ``key`` (a non-negative int: the chunk store's slot); -1 if unknown.
        ``TypeError`` for a string: the index is keyed by slots only."""
        if isinstance(key, str):
            raise TypeError(f"the symbol index is keyed by chunk slots (ints); got the string {key!r}")
        try:
            s = operator.index(key)  # type: ignore[call-overload]
        except TypeError:
            if create:
                raise
            return -1
        if s < 0 and create:
            raise ValueError(f"slot must be >= 0, got {s}")
        return s

    def __contains__(self, key: object) -> bool:
        return not isinstance(key, str) and self._eid(self._slot_for(key)) >= 0

    # --- updates -------------------------------------------------------------------------
    def add(
        self,
        key: int,
        name: str,
        *,
        container: str | Iterable[str] = "",
        kind: str = "",
        boost: float = 0.0,
    ) -> None:
        """Index ``name`` under slot ``key`` (replacing an earlier entry at that slot).

        ``container``: the qualifier(s) a ``<container>.<name>`` query may use -- one string or
        several (for a method: the module's short name ``ОбщегоНазначения``; for a metadata
        object: its type in Russian and English, singular and plural, e.g. ``["Справочник",
        "Справочники", "Catalog", "Catalogs"]``). Empty strings are ignored. ``kind`` is stored
        and returned by :meth:`get` (``"function"``, ``"object"`` ...); it does not affect
        ranking. ``boost``: the secondary ranking key inside one match kind, higher first,
        compared at :data:`BOOST_RESOLUTION` (see :func:`api_boost`). Raises ``ValueError`` for
        an empty name or a non-finite boost. Cost: O(len(name)) plus a buffered insert into
        four sorted arrays (merged before the next search).
        """
        if not name:
            raise ValueError(f"empty symbol name for key {key!r}")
        if (
            _SEP in name
            or _SEP in kind
            or (_SEP in container if isinstance(container, str) else any(_SEP in c for c in container))
        ):
            raise ValueError(f"control character U+001F in the symbol entry for key {key!r}")
        if not math.isfinite(boost):
            raise ValueError(f"boost must be finite, got {boost!r} for key {key!r}")
        slot = self._slot_for(key, create=True)
        if self._eid(slot) >= 0:
            self._remove_slot(slot)
        conts = (container,) if isinstance(container, str) else tuple(container)
        conts = tuple(dict.fromkeys(self._interned(c) for c in conts if c))
        eid = len(self._slot)
        fname = fold(name)
        splits = _word_splits(name)
        self._slot.append(slot)
        eo = self._eid_of
        if slot >= len(eo):
            eo.frombytes(b"\xff" * (4 * (slot + 1 - len(eo))))
        eo[slot] = eid
        self._n_live += 1
        self._names.append(name)
        self._fnames.append(fname)
        self._sigs.append(_signature(splits[0]))
        self._sigs2.append(_signature(splits[1]) if len(splits) > 1 else None)
        self._conts.append(conts)
        self._kinds.append(self._interned(kind))
        self._boosts.append(float(boost))
        self._comp.append(_composite(boost, len(fname)))
        self._alive.append(1)
        self._by_name.pending.append(eid)
        ini0 = self._interned(_initials(splits[0]))
        self._ini_text.append(ini0)
        self._by_ini.pending.append(2 * eid)
        ini1 = self._interned(_initials(splits[1])) if len(splits) > 1 else None
        self._ini_text.append(ini1 if ini1 != ini0 else None)
        if ini1 is not None and ini1 != ini0:
            self._by_ini.pending.append(2 * eid + 1)
        for c in conts:
            fc, c_inis, _ = self._container_info(c)
            self._by_cont.pending.append(len(self._crow_text))
            self._crow_text.append(fc)
            self._crow_eid.append(eid)
            for ini in c_inis:
                self._by_cini.pending.append(len(self._cini_text))
                self._cini_text.append(ini)
                self._cini_eid.append(eid)
        self._tri_pending.append(eid)

    def _interned(self, text: str) -> str:
        return self._intern.setdefault(text, text)

    def _container_info(self, c: str) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
        """(folded container, initials of its word splittings, their signatures); cached,
        containers repeat (one module holds hundreds of methods)."""
        info = self._cont_cache.get(c)
        if info is None:
            splits = _word_splits(c)
            inis = tuple(dict.fromkeys(self._interned(_initials(w)) for w in splits))
            info = (self._interned(fold(c)), inis, tuple(_signature(w) for w in splits))
            self._cont_cache[c] = info
        return info

    def remove(self, key: int) -> bool:
        """Remove the entry at slot ``key``; False if absent. O(1): its sorted-array rows go
        stale and are skipped; when stale entries exceed half the live ones (and 1,024), the
        index is rebuilt compactly (O(n log n), amortised O(log n) per removal)."""
        slot = self._slot_for(key)
        if self._eid(slot) < 0:
            return False
        self._remove_slot(slot)
        return True

    def _remove_slot(self, slot: int) -> None:
        eid = self._eid_of[slot]
        self._eid_of[slot] = -1
        self._n_live -= 1
        self._alive[eid] = 0
        self._dead += 1
        if self._dead > 1024 and self._dead > self._n_live // 2:
            self._rebuild(self._state())

    def get(self, key: int) -> tuple[str, tuple[str, ...], str, float] | None:
        """``(name, containers, kind, boost)`` of the entry at slot ``key``, or None."""
        eid = self._eid(self._slot_for(key))
        if eid < 0:
            return None
        return self._names[eid], self._conts[eid], self._kinds[eid], self._boosts[eid]

    def flush(self) -> None:
        """Merge buffered additions into the sorted arrays and the trigram postings
        (searching does it by itself; call it to take the cost at a chosen moment)."""
        self._flush()

    def _flush(self) -> None:
        for s in (self._by_name, self._by_ini, self._by_cont, self._by_cini):
            s.flush()
        if self._tri_pending:
            self._index_trigrams(self._tri_pending)
            self._tri_pending = []

    def _index_trigrams(self, eids: list[int]) -> None:
        """Append ``eids`` (ascending, above every indexed id) to the trigram postings of
        their folded names: a Python loop for a few, one numpy pass for a bulk load."""
        tri, fnames = self._tri, self._fnames
        if len(eids) <= 64:
            for eid in eids:
                fname = fnames[eid]
                for t in {fname[i : i + 3] for i in range(len(fname) - 2)}:
                    post = tri.get(t)
                    if post is None:
                        post = tri[t] = array("i")
                    post.append(eid)
            return
        names = [fnames[e] for e in eids]
        codes = np.frombuffer("".join(names).encode("utf-32-le", "surrogatepass"), dtype="<u4").astype(np.uint64)
        lens = np.fromiter(map(len, names), dtype=np.int64, count=len(names))
        n_tri = np.maximum(lens - 2, 0)
        total = int(n_tri.sum())
        if not total:
            return
        # position of every trigram: its name's start plus its index inside the name
        first = np.cumsum(n_tri) - n_tri
        pos = np.repeat(np.cumsum(lens) - lens - first, n_tri) + np.arange(total)
        key = (codes[pos] << np.uint64(42)) | (codes[pos + 1] << np.uint64(21)) | codes[pos + 2]
        owner = np.repeat(np.asarray(eids, dtype=np.int32), n_tri)
        order = np.lexsort((owner, key))
        key, owner = key[order], owner[order]
        new = np.ones(total, dtype=bool)
        new[1:] = (key[1:] != key[:-1]) | (owner[1:] != owner[:-1])  # a trigram twice in a name
        key, owner = key[new], owner[new]
        starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
        bounds = np.append(starts, key.size).tolist()
        raw = owner.astype("<i4").tobytes()
        mask = (1 << 21) - 1
        for i, k in enumerate(key[starts].tolist()):
            t = chr(k >> 42) + chr((k >> 21) & mask) + chr(k & mask)
            post = tri.get(t)
            if post is None:
                post = tri[t] = array("i")
            post.frombytes(raw[4 * bounds[i] : 4 * bounds[i + 1]])

    # --- candidate generation -----------------------------------------------------------
    def exact_slots(self, name: str) -> np.ndarray:
        """Slots (int64, in name order) of the live entries whose name equals ``name`` after
        :func:`daemon.text.folding.fold` (case, ``ё``); a binary search of the sorted names, no
        scan. Used by :meth:`daemon.sources.docs.DocLinks.from_store`."""
        self._by_name.flush()  # the other sorted arrays and trigrams wait for the next search
        fq = fold(name)
        lo, hi = self._by_name.prefix_range(fq)
        ids = self._live(self._by_name.view(lo, self._by_name.exact_end(fq, lo, hi)))
        return (
            np.frombuffer(self._slot, dtype=np.uint32)[ids].astype(np.int64)
            if ids.size
            else np.zeros(0, dtype=np.int64)
        )

    def _live(self, ids: np.ndarray) -> np.ndarray:
        if self._dead and ids.size:
            ids = ids[np.frombuffer(self._alive, dtype=np.uint8)[ids] == 1]
        return ids

    def _name_tiers(self, fq: str, q_humps: list[str]) -> Iterator[tuple[int, np.ndarray]]:
        """Lazily, ``(kind rank, live ids)`` for exact, prefix, camelhump, substring matches of
        folded ``fq``; each kind is computed only when the consumer asks for it (so the
        substring scan runs only when the better kinds gave fewer results than wanted)."""
        lo, hi = self._by_name.prefix_range(fq)
        mid = self._by_name.exact_end(fq, lo, hi)
        yield 0, self._live(self._by_name.view(lo, mid))
        yield 1, self._live(self._by_name.view(mid, hi))
        hump = self._camelhump(fq, q_humps) if len(q_humps) >= 2 else np.zeros(0, dtype=np.int64)
        yield 2, hump
        if len(fq) >= SUBSTRING_MIN_LEN:
            yield 3, self._substring(fq, exclude=hump)

    def _camelhump(self, fq: str, q_humps: list[str]) -> np.ndarray:
        """Live ids whose words start with the humps (and whose name does not start with
        ``fq``). Candidates: the smaller of "initials start with the humps' initials" and
        "name starts with the first hump"; each is verified."""
        ilo, ihi = self._by_ini.prefix_range("".join(h[0] for h in q_humps))
        nlo, nhi = self._by_name.prefix_range(q_humps[0])
        if ihi - ilo <= nhi - nlo:
            cand = np.unique(self._by_ini.view(ilo, ihi) // 2)
        else:
            cand = self._by_name.view(nlo, nhi)
        cand = self._live(cand)
        if not cand.size:
            return cand
        sigs = self._sigs.take(cand.tolist())
        # each distinct signature is matched once: one method name recurs in many modules
        # (a form's event handlers in every form)
        distinct = set(sigs)
        rx = _hump_matcher(q_humps, len(distinct))
        ok = {a for a in distinct if rx(a)}
        hit = np.fromiter((a in ok for a in sigs), dtype=bool, count=len(sigs))
        # the second word splitting, for the entries that have one (few names do)
        again = np.flatnonzero(~hit & self._sigs2.nonempty(cand))
        if again.size:
            sigs2 = self._sigs2.take(cand[again].tolist())
            ok2 = {b for b in set(sigs2) if rx(b)}
            hit[again[np.fromiter((b in ok2 for b in sigs2), dtype=bool, count=len(sigs2))]] = True
        found = cand[hit]
        # names that start with fq are the prefix tier's: the ids of its sorted range
        lo, hi = self._by_name.prefix_range(fq)
        if hi > lo and found.size:
            found = found[~np.isin(found, self._by_name.view(lo, hi))]
        return found.astype(np.int64, copy=False)

    def _substring(self, fq: str, exclude: np.ndarray) -> np.ndarray:
        """Live ids whose folded name contains ``fq`` (3+ characters) but does not start
        with it, minus ``exclude``; at most :data:`SUBSTRING_MAX_HITS`.

        Candidates come from the trigram postings: the rarest trigram of ``fq``, intersected
        with the next rarest while that stays cheap; each candidate is verified."""
        posts = []
        for t in {fq[i : i + 3] for i in range(len(fq) - 2)}:
            post = self._tri.get(t)
            if post is None:
                return np.zeros(0, dtype=np.int64)
            posts.append(post)
        posts.sort(key=len)
        cand = np.frombuffer(posts[0], dtype=np.int32).astype(np.int64)
        for post in posts[1:]:
            if len(post) > 16 * cand.size:
                break
            cand = np.intersect1d(cand, np.frombuffer(post, dtype=np.int32), assume_unique=True)
        cand = self._live(cand)
        el = cand.tolist()
        hits = [e for e, f in zip(el, self._fnames.take(el), strict=False) if fq in f and not f.startswith(fq)]
        ids = np.asarray(hits[:SUBSTRING_MAX_HITS], dtype=np.int64)
        if exclude.size and ids.size:
            ids = ids[~np.isin(ids, exclude)]
        return ids

    def _container_ids(self, cq: str) -> tuple[np.ndarray, np.ndarray]:
        """(ids, container kind rank 0 exact / 1 prefix / 2 camelhump) for container query."""
        fcq = fold(cq)
        lo, hi = self._by_cont.prefix_range(fcq)
        rows = self._by_cont.view(lo, hi)
        texts = self._crow_text.vals
        ranks = np.fromiter((0 if texts[r] == fcq else 1 for r in rows.tolist()), dtype=np.int64, count=rows.size)
        ids = np.frombuffer(self._crow_eid, dtype=np.int64)[rows] if rows.size else rows
        q_humps = humps(cq)
        if len(q_humps) >= 2:
            ilo, ihi = self._by_cini.prefix_range("".join(h[0] for h in q_humps))
            if ihi > ilo:
                crow = self._by_cini.view(ilo, ihi)
                cand = np.unique(np.frombuffer(self._cini_eid, dtype=np.int64)[crow])
                rx = _hump_matcher(q_humps, cand.size)
                info = self._container_info
                extra = [e for e in cand.tolist() if any(rx(sig) for c in self._conts[e] for sig in info(c)[2])]
                if extra:
                    ids = np.concatenate((ids, np.asarray(extra, dtype=np.int64)))
                    ranks = np.concatenate((ranks, np.full(len(extra), 2, dtype=np.int64)))
        if ids.size:
            # best rank per id
            order = np.lexsort((ranks, ids))
            ids, ranks = ids[order], ranks[order]
            first = np.concatenate(([True], ids[1:] != ids[:-1]))
            ids, ranks = ids[first], ranks[first]
            if self._dead:
                live = np.frombuffer(self._alive, dtype=np.uint8)[ids] == 1
                ids, ranks = ids[live], ranks[live]
        return ids, ranks

    # --- ordering ------------------------------------------------------------------------
    def _ordered(self, ids: np.ndarray, key_of: Callable[[int], str] | None) -> Iterator[int]:
        """Yield ``ids`` in rank order (composite, then the shorter key, then the key; by
        slot without ``key_of``), sorting lazily in batches."""
        comp = np.frombuffer(self._comp, dtype=np.int64)
        slot = self._slot
        if key_of is None:

            def order(e: int) -> tuple:
                return comp[e], slot[e]
        else:

            def order(e: int) -> tuple:
                k = key_of(slot[e])
                return comp[e], len(k), k

        batch = 64
        while ids.size:
            c = comp[ids]
            if ids.size > batch:
                thr = np.partition(c, batch - 1)[batch - 1]
                take = c <= thr
                head, ids = ids[take], ids[~take]
            else:
                head, ids = ids, ids[:0]
            yield from sorted(head.tolist(), key=order)
            batch *= 4

    # --- search --------------------------------------------------------------------------
    def search(
        self,
        query: str,
        k: int,
        *,
        allow: np.ndarray | Callable | None = None,
        key_of: Callable[[int], str] | Sequence[str | None] | None = None,
    ) -> list[tuple]:
        """Best ``k`` entries for ``query``: ``[(slot, score, match_kind), ...]``, best first.

        ``match_kind`` is one of :data:`MATCH_KINDS` (for a qualified query: the kind of the
        name part). Order: qualified matches before name-only ones; then the name's match kind;
        for qualified matches the container's kind (exact, prefix, camelhump); then ``boost``
        descending, the shorter name, the shorter key, the key. ``score`` is monotone in that
        order and readable: 40 / 30 / 20 / 10 for the four kinds plus ``boost / (1 + |boost|)``
        (in (-1, 1), so kinds never interleave), minus 40 for name-only hits of a qualified
        query. Surrounding whitespace and a trailing ``()`` are ignored. Queries that are not
        identifiers (see :func:`is_identifier_query`), ``k <= 0`` or an empty index give
        ``[]``. ``allow``: a bool array indexed by slot (slots beyond it are not allowed) or
        a predicate on the slot (called in rank order until ``k`` pass). ``key_of(slot)``
        gives the key for the "shorter key, then key" tie-breaks (a sequence is indexed);
        without it ties go by slot.
        """
        q = _clean_query(query)
        if k <= 0 or not self._n_live or not is_identifier_query(q):
            return []
        if key_of is not None and not callable(key_of):
            key_of = key_of.__getitem__
        return self._search(q, k, allow, key_of)  # type: ignore[arg-type]

    def _search(
        self, q: str, k: int, allow: np.ndarray | Callable | None, key_of: Callable[[int], str] | None
    ) -> list[tuple[int, float, str]]:
        self._flush()
        if isinstance(allow, np.ndarray):
            ok = allow

            def allow_ids(ids: np.ndarray) -> np.ndarray:
                slots = np.frombuffer(self._slot, dtype=np.uint32)[ids]
                keep = slots < ok.size
                keep[keep] = ok[slots[keep]]
                return ids[keep]

            self._allow_ids: Callable[[np.ndarray], np.ndarray] | None = allow_ids
            allow = None
        else:
            self._allow_ids = None
        self._key_of = key_of
        out: list[tuple[int, float, str]] = []
        if "." in q:
            cq, _, nq = q.rpartition(".")
            fnq, nq_humps = fold(nq), humps(nq)
            ids, nranks, cranks = self._qualified(cq, fnq, nq_humps, k)
            if not ids.size and "." in cq:
                ids, nranks, cranks = self._qualified(cq.rpartition(".")[2], fnq, nq_humps, k)
            for nrank in range(4):
                for crank in range(3):
                    sel = ids[(nranks == nrank) & (cranks == crank)]
                    if sel.size and self._emit(out, sel, nrank, False, k, allow):
                        return out
            if fnq:
                for nrank, group in self._name_tiers(fnq, nq_humps):
                    if ids.size and group.size:
                        group = group[~np.isin(group, ids)]
                    if group.size and self._emit(out, group, nrank, True, k, allow):
                        return out
        elif _ACRONYM_RE.fullmatch(q):
            # an acronym is first a word: the names that hold it as a word part (СуммаНДС,
            # СтавкаНДС) come after exact and prefix matches, before CamelHump expansions
            fq = fold(q)
            parts = np.zeros(0, dtype=np.int64)
            for nrank, group in self._name_tiers(fq, humps(q)):
                if nrank == 2:
                    parts = self._part_ids(fq)
                    if parts.size and self._emit(out, parts, 4, False, k, allow):
                        return out
                if parts.size and group.size:
                    group = group[~np.isin(group, parts)]
                if group.size and self._emit(out, group, nrank, False, k, allow):
                    return out
        else:
            for nrank, group in self._name_tiers(fold(q), humps(q)):
                if group.size and self._emit(out, group, nrank, False, k, allow):
                    return out
        return out

    def _part_ids(self, fq: str) -> np.ndarray:
        """Live ids whose name has the folded word ``fq`` as one of its word parts
        (:func:`daemon.text.folding.split_words`), the name not starting with it (the prefix
        tier has those). Candidates from the trigram postings: a 2-letter ``fq`` has none."""
        if len(fq) < SUBSTRING_MIN_LEN:
            return np.zeros(0, dtype=np.int64)
        cand = self._substring(fq, np.zeros(0, dtype=np.int64))
        el = cand.tolist()
        hits = [e for e, n in zip(el, self._names.take(el), strict=True) if any(fold(w) == fq for w in split_words(n))]
        return np.asarray(hits, dtype=np.int64)

    def _emit(
        self,
        out: list[tuple[int, float, str]],
        ids: np.ndarray,
        nrank: int,
        name_only: bool,
        k: int,
        allow: Callable[[int], bool] | None,
    ) -> bool:
        """Append ``ids`` in rank order to ``out``; True once ``out`` holds ``k`` results."""
        kind = EMIT_KINDS[nrank]
        base = _KIND_BASE[kind] - (_UNQUALIFIED_PENALTY if name_only else 0.0)
        slots, boosts = self._slot, self._boosts
        if self._allow_ids is not None:
            ids = self._allow_ids(ids)
        for e in self._ordered(ids, self._key_of):
            slot = slots[e]
            if allow is not None and not allow(slot):
                continue
            b = boosts[e]
            out.append((slot, base + b / (1.0 + abs(b)), kind))
            if len(out) == k:
                return True
        return False

    def _qualified(self, cq: str, fnq: str, nq_humps: list[str], k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Entries matching container part ``cq`` and name part ``fnq``: (ids, name kind
        ranks, container kind ranks). Walks whichever side has fewer candidates: the
        entries of the matching containers, or the entries matching the name."""
        fcq, c_humps = fold(cq), humps(cq)
        clo, chi = self._by_cont.prefix_range(fcq)
        c_size = chi - clo
        if len(c_humps) >= 2:
            ilo, ihi = self._by_cini.prefix_range("".join(h[0] for h in c_humps))
            c_size += ihi - ilo
        n_size = 1 << 62
        if fnq:
            nlo, nhi = self._by_name.prefix_range(fnq)
            n_size = nhi - nlo
            if len(nq_humps) >= 2:
                ilo, ihi = self._by_ini.prefix_range("".join(h[0] for h in nq_humps))
                n_size += ihi - ilo
        if c_size <= n_size:
            ids, cranks = self._container_ids(cq)
            nranks = self._name_ranks(ids, fnq, nq_humps)
            keep = nranks < 4
            return ids[keep], nranks[keep], cranks[keep]
        # name side: the name's matches, filtered by their containers
        out_ids: list[int] = []
        out_n: list[int] = []
        out_c: list[int] = []
        matcher = _hump_matcher(c_humps, 1 << 30) if len(c_humps) >= 2 else None

        def collect(group: np.ndarray, nrank: int) -> None:
            for e in group.tolist():
                cr = self._cont_rank(e, fcq, matcher)
                if cr is not None:
                    out_ids.append(e)
                    out_n.append(nrank)
                    out_c.append(cr)

        for nrank, group in self._name_tiers(fnq, nq_humps):
            if nrank == 3 and len(out_ids) >= k:
                break
            collect(group, nrank)
        return (
            np.asarray(out_ids, dtype=np.int64),
            np.asarray(out_n, dtype=np.int64),
            np.asarray(out_c, dtype=np.int64),
        )

    def _cont_rank(self, e: int, fcq: str, matcher: Callable[[str], bool] | None) -> int | None:
        """Best container kind rank of entry ``e`` for folded container query ``fcq``."""
        best = None
        for c in self._conts[e]:
            fc, _, sigs = self._container_info(c)
            if fc == fcq:
                return 0
            if fc.startswith(fcq):
                best = 1
            elif best is None and matcher is not None and any(matcher(sig) for sig in sigs):
                best = 2
        return best

    def _name_ranks(self, ids: np.ndarray, fnq: str, nq_humps: list[str]) -> np.ndarray:
        """Kind rank of each id's name against the name part (4 = no match)."""
        if not ids.size:
            return np.zeros(0, dtype=np.int64)
        if not fnq:
            return np.ones(ids.size, dtype=np.int64)  # empty name part: list the container
        fnames, sigs, sigs2 = self._fnames, self._sigs, self._sigs2
        rx = _hump_matcher(nq_humps, ids.size) if len(nq_humps) >= 2 else None
        sub = len(fnq) >= SUBSTRING_MIN_LEN
        el = ids.tolist()
        ranks = [4] * len(el)
        left: list[int] = []  # positions that are not a prefix match
        names = fnames.take(el)
        for i, f in enumerate(names):
            if f.startswith(fnq):
                ranks[i] = 0 if len(f) == len(fnq) else 1
            else:
                left.append(i)
        if rx is not None and left:
            le = [el[i] for i in left]
            for i, a, b in zip(left, sigs.take(le), sigs2.take(le), strict=False):
                if rx(a) or (b is not None and rx(b)):
                    ranks[i] = 2
        if sub:
            for i in left:
                if ranks[i] == 4 and fnq in names[i]:
                    ranks[i] = 3
        return np.asarray(ranks, dtype=np.int64)

    # --- persistence ---------------------------------------------------------------------
    def to_state(self) -> SymbolState:
        """Snapshot of the live entries in insertion order, with the derived structures and
        their slots (msgspec-encodable; see :class:`SymbolState`; the daemon saves column
        files instead: :meth:`save`)."""
        return self._state()

    def _state(self) -> SymbolState:
        """Snapshot of the live entries in insertion order (slots, no keys)."""
        self._flush()
        n_all = len(self._slot)
        alive = np.frombuffer(self._alive, dtype=np.uint8).astype(bool)
        remap = np.cumsum(alive, dtype=np.int64) - 1  # old id -> new id (where alive)
        if self._dead:
            live = np.flatnonzero(alive).tolist()

            def col(c: list) -> list:
                return [c[e] for e in live]

        else:

            def col(c: list) -> list:
                return list(c)

        ini = self._ini_text

        def u4(a: np.ndarray) -> bytes:
            return a.astype("<u4").tobytes()

        ids = np.frombuffer(self._by_name.ids, dtype=np.int64)
        ids = remap[ids[alive[ids]]]
        rows = np.frombuffer(self._by_ini.ids, dtype=np.int64)
        rows = rows[alive[rows >> 1]]
        rows = 2 * remap[rows >> 1] + (rows & 1)
        by_cont = self._rows_state(self._by_cont.ids, self._crow_eid, alive)
        by_cini = self._rows_state(self._by_cini.ids, self._cini_eid, alive)
        # trigram postings, stale ids dropped, renumbered
        terms = list(self._tri)
        posts = [np.frombuffer(p, dtype=np.int32) for p in self._tri.values()]
        counts = np.fromiter(map(len, posts), dtype=np.int64, count=len(posts))
        flat = np.concatenate(posts) if posts else np.zeros(0, dtype=np.int32)
        if self._dead and flat.size:
            keep = alive[flat]
            flat = remap[flat[keep]]
            owner = np.repeat(np.arange(len(posts)), counts)[keep]
            counts = np.bincount(owner, minlength=len(posts))
            terms = list(compress(terms, (counts > 0).tolist()))
            counts = counts[counts > 0]
        del posts
        slots = np.frombuffer(self._slot, dtype=np.uint32)
        return SymbolState(
            keys=[],
            slots=(slots[alive] if self._dead else slots).astype("<u4").tobytes(),
            names=col(self._names),
            containers=[list(c) for c in col(self._conts)],
            kinds=col(self._kinds),
            boosts=col(self._boosts.tolist()),
            layout=STATE_LAYOUT,
            fnames=col(self._fnames),
            sigs=col(self._sigs),
            sigs2=col(self._sigs2),
            inis=col([ini[2 * e] for e in range(n_all)]),
            inis2=col([ini[2 * e + 1] for e in range(n_all)]),
            by_name=u4(ids),
            by_ini=u4(rows),
            by_cont=by_cont,
            by_cini=by_cini,
            tri_terms=terms,
            tri_offsets=u4(np.concatenate(([0], np.cumsum(counts)))),
            tri_ids=flat.astype("<i4").tobytes(),
        )

    @staticmethod
    def _rows_state(sorted_rows: array, row_eid: array, alive: np.ndarray) -> bytes:
        """Sorted container rows of live entries, renumbered as the rows of the live
        entries (rows are appended in id order, so that is their rank)."""
        rows = np.frombuffer(sorted_rows, dtype=np.int64)
        eid = np.frombuffer(row_eid, dtype=np.int64)
        row_alive = alive[eid] if eid.size else np.zeros(0, dtype=bool)
        new_row = np.cumsum(row_alive, dtype=np.int64) - 1
        rows = rows[row_alive[rows]] if rows.size else rows
        return new_row[rows].astype("<u4").tobytes() if rows.size else b""

    def _rebuild(self, state: SymbolState) -> None:
        """Reset to ``state``, with no per-name work; ``ValueError`` if it is inconsistent
        (see :meth:`from_state`; the index may then be left empty)."""
        n = len(state.names)
        slots, boosts, by_name, by_ini, tri_off, tri_ids = _checked_state(state)
        self._init()
        interned = self._intern.setdefault
        self._slot = array("I", slots.astype("<u4").tobytes())
        eo = np.full(int(slots.max()) + 1 if n else 0, -1, dtype="<i4")
        eo[slots] = np.arange(n, dtype="<i4")
        self._eid_of = array("i", eo.tobytes())
        self._n_live = n
        self._names.extend(state.names)
        self._fnames.extend(state.fnames)
        self._sigs.extend(state.sigs)
        self._sigs2.extend(state.sigs2)
        for c in state.containers:
            self._conts.append(tuple(map(interned, c, c)))
        for kind in state.kinds:
            self._kinds.append(kind)
        self._boosts = array("d", boosts.tobytes())
        self._comp = array("q", _composites(boosts, state.fnames).tobytes())
        self._alive = bytearray(b"\x01" * n)
        ini_col = self._ini_text
        for a, b in zip(state.inis, state.inis2, strict=False):
            ini_col.append(a)
            ini_col.append(b)
        # container rows, in id order as add() appends them
        info = self._container_info
        crow_text, crow_eid = self._crow_text, []
        cini_text, cini_eid = self._cini_text, []
        for e, conts in enumerate(list(self._conts)):
            for c in conts:
                fc, c_inis, _ = info(c)
                crow_text.append(fc)
                crow_eid.append(e)
                for ci in c_inis:
                    cini_text.append(ci)
                    cini_eid.append(e)
        self._crow_eid = array("q", crow_eid)
        self._cini_eid = array("q", cini_eid)
        by_cont, by_cini = _u4(state.by_cont), _u4(state.by_cini)
        if not _is_permutation(by_cont, np.ones(len(crow_text), dtype=bool)) or not _is_permutation(
            by_cini, np.ones(len(cini_text), dtype=bool)
        ):
            self._init()
            raise ValueError("symbol state is inconsistent (sorted container ids)")
        for sorted_ids, arr in (
            (self._by_name, by_name),
            (self._by_ini, by_ini),
            (self._by_cont, by_cont),
            (self._by_cini, by_cini),
        ):
            sorted_ids.ids = array("q", arr.astype(np.int64).tobytes())
        self._install_trigrams(state.tri_terms, tri_off, tri_ids)

    def save(self, folder: Path | str) -> None:
        """Write the index into ``folder`` (created if missing) as column files, one
        ``.npy`` each, then ``header.json`` (format, layout, counts, byte size and CRC-32 of
        every file): the name, folded-name and signature columns as one UTF-8 text plus
        character offsets each; kinds, initials, folded containers and container tuples as
        ``uint32`` ids into small tables of distinct values; slots, boosts, container rows,
        the four sorted id arrays and the trigram postings as raw arrays. Compacts first when
        entries are dead. Files are fsynced; the caller makes the folder's appearance
        atomic."""
        self._flush()
        if self._dead:
            self._rebuild(self._state())
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        cols: dict[str, np.ndarray] = {}
        for name in _TEXT_COLS:
            col: _StrCol = getattr(self, "_" + name)
            col.freeze()
            cols[name + "_text"] = np.frombuffer(col.big.encode("utf-8", "surrogatepass"), dtype=np.uint8)
            cols[name + "_off"] = np.frombuffer(col.off, dtype=np.uint32)
        for name in _INTERNED_COLS:
            icol: _Interned = getattr(self, "_" + name)
            cols[name + "_ids"] = np.frombuffer(icol.ids, dtype=np.uint32)
            cols[name + "_table"] = _join(icol.table[1:])
        conts = self._conts
        flat = [c for t in conts.table[1:] for c in t]
        cols["conts_ids"] = np.frombuffer(conts.ids, dtype=np.uint32)
        cols["conts_len"] = np.fromiter(map(len, conts.table[1:]), dtype=np.uint32, count=len(conts.table) - 1)
        cols["conts_table"] = _join(flat)
        cols["slots"] = np.frombuffer(self._slot, dtype=np.uint32)
        cols["boosts"] = np.frombuffer(self._boosts, dtype=np.float64)
        cols["crow_eid"] = np.frombuffer(self._crow_eid, dtype=np.int64)
        cols["cini_eid"] = np.frombuffer(self._cini_eid, dtype=np.int64)
        for name in _SORTED_COLS:
            cols[name] = np.frombuffer(getattr(self, "_" + name).ids, dtype=np.int64)
        terms = list(self._tri)
        posts = [np.frombuffer(p, dtype=np.int32) for p in self._tri.values()]
        cols["tri_terms"] = _join(terms)
        cols["tri_off"] = np.concatenate(([0], np.cumsum([p.size for p in posts], dtype=np.int64))).astype(np.int64)
        cols["tri_ids"] = np.concatenate(posts) if posts else np.zeros(0, dtype=np.int32)
        del posts
        files = {name: save_npy_synced(folder / f"{name}.npy", arr) for name, arr in cols.items()}
        counts = {
            "entries": len(self._slot),
            **{name: len(getattr(self, "_" + name).table) - 1 for name in _INTERNED_COLS},
            "conts": len(conts.table) - 1,
            "conts_flat": len(flat),
            "tri_terms": len(terms),
        }
        header = {"format": FORMAT, "layout": STATE_LAYOUT, "counts": counts, "files": files}
        with open(folder / _HEADER, "w", encoding="utf-8") as fh:
            json.dump(header, fh, indent=1)
            fh.flush()
            os.fsync(fh.fileno())

    @classmethod
    def load(cls, folder: Path | str, *, mmap: bool = True, verify: bool = False) -> SymbolIndex:
        """Open an index written by :meth:`save`: no per-entry work (the text columns are
        decoded as one string each, the rest are array copies and small tables). ``mmap``:
        read the files through a memory map; ``verify``: also check each file's CRC-32.
        Raises :class:`SymbolError` naming the folder for a missing, foreign or damaged file
        (sizes, counts, offsets, ids out of range, sorted arrays that are not permutations
        of their rows, non-finite boosts, duplicate slots)."""
        folder = Path(folder)
        try:
            index = cls()
            index._load_columns(folder, mmap, verify)
            return index
        except SymbolError:
            raise
        except (OSError, KeyError, TypeError, ValueError, UnicodeDecodeError) as exc:
            raise SymbolError(f"names index in {folder}: {exc}") from exc

    def _load_columns(self, folder: Path, mmap: bool, verify: bool) -> None:
        cols = _ColumnFiles(folder, mmap, verify)
        n = cols.n
        self._init()
        self._load_text_columns(cols)
        self._load_interned(cols)
        self._load_containers(cols)
        slots = cols.arr("slots", "<u4", n)
        if n and (int(slots.max()) >= 1 << 31 or int(np.bincount(slots).max()) > 1):
            raise cols.bad("slots")
        boosts = cols.arr("boosts", "<f8", n)
        if not np.isfinite(boosts).all():
            raise cols.bad("boosts (not finite)")
        n_crow, n_cini = len(self._crow_text), len(self._cini_text)
        crow_eid = cols.arr("crow_eid", "<i8", n_crow)
        cini_eid = cols.arr("cini_eid", "<i8", n_cini)
        if not _in_range(crow_eid, n) or not _in_range(cini_eid, n):
            raise cols.bad("container rows")
        self._load_sorted(cols, n_crow, n_cini)
        tri_terms = _split(cols.arr("tri_terms", "|u1"), int(cols.counts["tri_terms"]))
        tri_off = cols.arr("tri_off", "<i8", len(tri_terms) + 1)
        tri_ids = cols.arr("tri_ids", "<i4")
        if (
            tri_off[0] != 0
            or int(tri_off[-1]) != tri_ids.size
            or np.any(np.diff(tri_off) < 0)
            or not _in_range(tri_ids, n)
        ):
            raise cols.bad("trigram postings")
        self._slot = array("I", slots.astype("<u4").tobytes())
        eo = np.full(int(slots.max()) + 1 if n else 0, -1, dtype="<i4")
        eo[slots] = np.arange(n, dtype="<i4")
        self._eid_of = array("i", eo.tobytes())
        self._n_live = n
        self._boosts = array("d", boosts.astype("<f8").tobytes())
        fname_len = np.diff(np.frombuffer(self._fnames.off, dtype=np.uint32).astype(np.int64))
        self._comp = array("q", _composites_len(np.asarray(boosts, dtype=np.float64), fname_len).tobytes())
        self._alive = bytearray(b"\x01" * n)
        self._crow_eid = array("q", crow_eid.astype("<i8").tobytes())
        self._cini_eid = array("q", cini_eid.astype("<i8").tobytes())
        self._install_trigrams(tri_terms, tri_off, tri_ids)

    def _load_text_columns(self, cols: _ColumnFiles) -> None:
        """The name, folded-name and signature columns: one UTF-8 text plus offsets each."""
        n = cols.n
        for name in _TEXT_COLS:
            off = cols.arr(name + "_off", "<u4", n + 1)
            text = bytes(cols.arr(name + "_text", "|u1")).decode("utf-8", "surrogatepass")
            d = np.diff(off.astype(np.int64))
            if (
                off[0] != 0
                or int(off[-1]) != len(text)
                or (d.size and int(d.min()) < (1 if name in ("names", "fnames") else 0))
            ):
                raise cols.bad(f"{name} offsets")
            col: _StrCol = getattr(self, "_" + name)
            col.big, col.off, col.nf = text, array("I", off.astype("<u4").tobytes()), n

    def _load_interned(self, cols: _ColumnFiles) -> None:
        """The kinds and initials: ids into tables of distinct values."""
        n = cols.n
        rows = {"kinds": n, "ini_text": 2 * n}
        for name in _INTERNED_COLS:
            table = [None, *_split(cols.arr(name + "_table", "|u1"), int(cols.counts[name]))]
            ids = cols.arr(name + "_ids", "<u4", rows.get(name))
            if not _in_range(ids, len(table)):
                raise cols.bad(f"{name} ids")
            icol: _Interned = getattr(self, "_" + name)
            icol.table, icol.index = table, dict(zip(table[1:], range(1, len(table)), strict=False))
            icol.ids = array("I", ids.astype("<u4").tobytes())
            icol.vals.extend(map(table.__getitem__, icol.ids))

    def _load_containers(self, cols: _ColumnFiles) -> None:
        """The container tuples (interned, each container string once) and each entry's tuple id."""
        n = cols.n
        flat = _split(cols.arr("conts_table", "|u1"), int(cols.counts["conts_flat"]))
        clen = cols.arr("conts_len", "<u4", int(cols.counts["conts"])).astype(np.int64)
        if int(clen.sum()) != len(flat):
            raise cols.bad("container tuples")
        interned = self._intern.setdefault
        flat = [interned(c, c) for c in flat]
        bounds = np.concatenate(([0], np.cumsum(clen))).tolist()
        tuples = [tuple(flat[bounds[i] : bounds[i + 1]]) for i in range(clen.size)]
        conts_ids = cols.arr("conts_ids", "<u4", n)
        if not _in_range(conts_ids, len(tuples) + 1) or (n and int(conts_ids.min()) == 0):
            raise cols.bad("container ids")
        self._conts.table = [None, *tuples]
        self._conts.index = dict(zip(tuples, range(1, len(tuples) + 1), strict=False))
        self._conts.ids = array("I", conts_ids.astype("<u4").tobytes())
        self._conts.vals.extend(map(self._conts.table.__getitem__, self._conts.ids))

    def _load_sorted(self, cols: _ColumnFiles, n_crow: int, n_cini: int) -> None:
        """The four sorted id lists, each a permutation of its rows."""
        ini_rows = np.frombuffer(self._ini_text.ids, dtype=np.uint32) != 0
        for name, rows_ok in (
            ("by_name", np.ones(cols.n, dtype=bool)),
            ("by_ini", ini_rows),
            ("by_cont", np.ones(n_crow, dtype=bool)),
            ("by_cini", np.ones(n_cini, dtype=bool)),
        ):
            ids = cols.arr(name, "<i8")
            if not _in_range(ids, max(rows_ok.size, 1)) or not _is_permutation(ids, rows_ok):
                raise cols.bad(f"{name} (not a permutation of its rows)")
            getattr(self, "_" + name).ids = array("q", ids.astype("<i8").tobytes())

    def _install_trigrams(self, terms: list[str], offsets: np.ndarray, ids: np.ndarray) -> None:
        """The trigram postings: ``ids[offsets[i]:offsets[i + 1]]`` for ``terms[i]``."""
        raw = np.ascontiguousarray(ids, dtype="<i4").tobytes()
        bounds = (4 * offsets).tolist()
        tri = self._tri
        for i, t in enumerate(terms):
            post = tri[t] = array("i")
            post.frombytes(raw[bounds[i] : bounds[i + 1]])

    @classmethod
    def from_state(cls, state: SymbolState) -> SymbolIndex:
        """Rebuild from :meth:`to_state` output; ``ValueError`` if the state is of another
        layout (:data:`STATE_LAYOUT`), holds string keys (the removed compatibility path),
        the columns differ in length, a slot repeats, a name is empty or the derived arrays
        do not fit the entries."""
        if state.keys:
            raise ValueError("symbol state with string keys: the index is keyed by chunk slots only")
        index = cls()
        index._rebuild(state)
        return index


#: Column-file format of :meth:`SymbolIndex.save`.
FORMAT = "bsl-lens.names"
_HEADER = "header.json"
#: Separator of the string columns in the saved blobs (never in a name: :meth:`SymbolIndex.add`
#: rejects it; identifiers cannot hold control characters).
_SEP = "\x1f"
#: Columns of :meth:`SymbolIndex.save`: big-string columns, interned columns, id arrays.
_TEXT_COLS = ("names", "fnames", "sigs", "sigs2")
_INTERNED_COLS = ("kinds", "ini_text", "crow_text", "cini_text")
_SORTED_COLS = ("by_name", "by_ini", "by_cont", "by_cini")


def _join(strings: list[str]) -> np.ndarray:
    text = _SEP.join(strings)
    if text.count(_SEP) != max(len(strings) - 1, 0):
        raise ValueError("a string column holds the separator U+001F")
    return np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)


def _split(blob: np.ndarray, n: int) -> list[str]:
    if n == 0:
        return []
    out = blob.tobytes().decode("utf-8", "surrogatepass").split(_SEP)
    if len(out) != n:
        raise ValueError(f"string column has {len(out)} entries, expected {n}")
    return out


def _u4(data: bytes) -> np.ndarray:
    if len(data) % 4:
        raise ValueError("symbol state is inconsistent (array of odd size)")
    return np.frombuffer(data, dtype="<u4")


def _is_permutation(ids: np.ndarray, rows: np.ndarray) -> bool:
    """True if ``ids`` lists every index where ``rows`` is True exactly once, and no other."""
    if ids.size != int(rows.sum()):
        return False
    if not ids.size:
        return True
    if int(ids.max()) >= rows.size:
        return False
    return bool(np.array_equal(np.bincount(ids, minlength=rows.size), rows))


def _composites(boosts: np.ndarray, fnames: list[str]) -> np.ndarray:
    """:func:`_composite` for many entries at once (numpy ``rint`` rounds half to even, as
    ``round`` does)."""
    return _composites_len(boosts, np.fromiter(map(len, fnames), dtype=np.int64, count=len(fnames)))


def _composites_len(boosts: np.ndarray, name_len: np.ndarray) -> np.ndarray:
    """:func:`_composites` from the folded names' lengths."""
    b = np.clip(np.rint(boosts / BOOST_RESOLUTION), -(1 << 30), 1 << 30).astype(np.int64)
    return (((1 << 30) - b) << 28) | (np.minimum(name_len, 4095) << 16)
