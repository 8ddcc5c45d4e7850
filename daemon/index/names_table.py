"""The names channel's entries in memory (:mod:`daemon.index.names`): columns and their upkeep.

:class:`NameTable` holds n entries as columns indexed by an internal entry id, with ``slot <->
entry`` as two ``array`` columns: names, folded names and the two word signatures are each ONE
``str`` plus ``array('I')`` offsets (:class:`StrColumn`, no per-entry ``str``); kinds, word
initials, folded containers and container tuples are ``uint32`` ids into small tables of
distinct values (:class:`InternedColumn`). Ids sorted by folded name, by word initials, by folded
container and by container initials (:class:`SortedIds`, ``bisect`` with a key function, so no
text is duplicated) and the trigram postings of the folded names are what a search reads.
Additions are buffered and merged by :meth:`NameTable.flush` (one sort for a bulk load,
``insort``-like inserts for a few; the trigrams of a bulk load in one numpy pass over the code
points); a removal marks the id dead (searches skip it). The owner compacts the table when dead
ids exceed half the live ones (:meth:`NameTable.remove_slot` says when).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator

import numpy as np

from daemon.text.folding import fold

from .names_words import initials, signature, word_splits

#: Dead entries above this many (and above half the live ones) make the owner compact the table.
_COMPACT_MIN_DEAD = 1024


class StrColumn:
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
        """Add a row at the end (None is stored as the empty string)."""
        self.tail.append(v or "")
        if len(self.tail) >= max(4096, self.nf >> 3):
            self.freeze()

    def extend(self, values: Iterable[str | None]) -> None:
        """Add rows at the end and :meth:`freeze` them (a bulk load)."""
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


class InternedColumn:
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
        """The table id of ``v``, added to the table if new (0 for None)."""
        if v is None:
            return 0
        i = self.index.get(v)
        if i is None:
            i = self.index[v] = len(self.table)
            self.table.append(v)
        return i

    def append(self, v: object) -> None:
        """Add a row at the end holding ``v``."""
        i = self.id_of(v)
        self.ids.append(i)
        self.vals.append(self.table[i])

    def __getitem__(self, r: int):  # -> the value (str, tuple or None)
        return self.vals[r]

    def __len__(self) -> int:
        return len(self.ids)

    def __iter__(self) -> Iterator:
        return iter(self.vals)


class SortedIds:
    """Ids sorted by ``text[id]`` (an ``array('q')``), with buffered inserts.

    ``text`` is a list owned by the index and indexed by id; bisect compares through it
    (``key=``), so no text is duplicated here.
    """

    __slots__ = ("ids", "pending", "text")

    def __init__(self, text: list | StrColumn | InternedColumn) -> None:
        self.ids = array("q")
        self.pending: list[int] = []
        self.text = text

    def flush(self) -> None:
        """Insert the buffered ids in order: one by one for a few, one sort for many."""
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
        """A copy of the sorted ids at positions ``[lo, hi)`` (``int64``)."""
        return np.frombuffer(self.ids, dtype=np.int64)[lo:hi].copy()


#: Boosts are compared at this resolution (so the rank fits one int64, see ``composite``).
BOOST_RESOLUTION = 1e-3


def composite(boost: float, name_len: int) -> int:
    """One int64 ordering entries inside a match kind: boost descending (at
    :data:`BOOST_RESOLUTION`), then shorter name (ties: shorter key, then key, compared at
    search time through ``key_of``)."""
    b = max(-(1 << 30), min(1 << 30, round(boost / BOOST_RESOLUTION)))
    return (((1 << 30) - b) << 28) | (min(name_len, 4095) << 16)


def composites(boosts: np.ndarray, fnames: list[str]) -> np.ndarray:
    """:func:`composite` for many entries at once (numpy ``rint`` rounds half to even, as
    ``round`` does)."""
    return composites_len(boosts, np.fromiter(map(len, fnames), dtype=np.int64, count=len(fnames)))


def composites_len(boosts: np.ndarray, name_len: np.ndarray) -> np.ndarray:
    """:func:`composites` from the folded names' lengths."""
    b = np.clip(np.rint(boosts / BOOST_RESOLUTION), -(1 << 30), 1 << 30).astype(np.int64)
    return (((1 << 30) - b) << 28) | (np.minimum(name_len, 4095) << 16)


class NameTable:
    """The entries ``slot → (name, containers, kind, boost)`` as columns (see the module doc).

    Entry ids are never reused until a compaction renumbers them; every attribute is read by
    the matching (:mod:`daemon.index.names_match`) and the saved form
    (:mod:`daemon.index.names_files`)."""

    def __init__(self) -> None:
        # columns, indexed by entry id (ids are never reused until a compaction renumbers them)
        self.slot = array("I")  # entry id -> slot
        self.eid_of = array("i")  # slot -> live entry id (-1: none)
        self.n_live = 0
        self.names = StrColumn()
        self.fnames = StrColumn()
        self.sigs = StrColumn()  # folded words joined by \x00 (capital split)
        self.sigs2 = StrColumn(none_empty=True)  # the split_words splitting, when it differs
        self.conts = InternedColumn()  # entry -> tuple of containers
        self.kinds = InternedColumn()
        self.boosts = array("d")
        self.comp = array("q")
        self.alive = bytearray()
        # initials rows: row 2*id from sigs, 2*id+1 from sigs2 (absent rows never inserted)
        self.ini_text = InternedColumn()
        # container rows
        self.crow_text = InternedColumn()  # folded container
        self.crow_eid = array("q")
        self.cini_text = InternedColumn()  # initials of a container splitting
        self.cini_eid = array("q")
        self.by_name = SortedIds(self.fnames)
        self.by_ini = SortedIds(self.ini_text.vals)
        self.by_cont = SortedIds(self.crow_text.vals)
        self.by_cini = SortedIds(self.cini_text.vals)
        self.dead = 0
        self.intern: dict[str, str] = {}
        self.cont_cache: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {}
        # substring search: trigram of the folded name -> ids (ascending, may hold stale ids);
        # ids added since the last flush are indexed by the next flush
        self.tri: dict[str, array] = {}
        self.tri_pending: list[int] = []

    def eid(self, slot: int) -> int:
        """The live entry id at ``slot``, -1 if none."""
        eo = self.eid_of
        return eo[slot] if 0 <= slot < len(eo) else -1

    def add(self, slot: int, name: str, containers: Iterable[str], kind: str, boost: float) -> None:
        """Append the entry of ``slot`` (which has none: the owner removed it first) and buffer its
        rows for the sorted arrays and the trigram postings. ``containers``: in order, empty strings
        and repeats ignored."""
        conts = tuple(dict.fromkeys(self.interned(c) for c in containers if c))
        eid = len(self.slot)
        fname = fold(name)
        splits = word_splits(name)
        self.slot.append(slot)
        eo = self.eid_of
        if slot >= len(eo):
            eo.frombytes(b"\xff" * (4 * (slot + 1 - len(eo))))
        eo[slot] = eid
        self.n_live += 1
        self.names.append(name)
        self.fnames.append(fname)
        self.sigs.append(signature(splits[0]))
        self.sigs2.append(signature(splits[1]) if len(splits) > 1 else None)
        self.conts.append(conts)
        self.kinds.append(self.interned(kind))
        self.boosts.append(float(boost))
        self.comp.append(composite(boost, len(fname)))
        self.alive.append(1)
        self.by_name.pending.append(eid)
        ini0 = self.interned(initials(splits[0]))
        self.ini_text.append(ini0)
        self.by_ini.pending.append(2 * eid)
        ini1 = self.interned(initials(splits[1])) if len(splits) > 1 else None
        self.ini_text.append(ini1 if ini1 != ini0 else None)
        if ini1 is not None and ini1 != ini0:
            self.by_ini.pending.append(2 * eid + 1)
        for c in conts:
            fc, c_inis, _ = self.container_info(c)
            self.by_cont.pending.append(len(self.crow_text))
            self.crow_text.append(fc)
            self.crow_eid.append(eid)
            for ini in c_inis:
                self.by_cini.pending.append(len(self.cini_text))
                self.cini_text.append(ini)
                self.cini_eid.append(eid)
        self.tri_pending.append(eid)

    def interned(self, text: str) -> str:
        """The one copy of ``text`` the table keeps (kinds, containers, initials repeat)."""
        return self.intern.setdefault(text, text)

    def container_info(self, c: str) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
        """(folded container, initials of its word splittings, their signatures); cached,
        containers repeat (one module holds hundreds of methods)."""
        info = self.cont_cache.get(c)
        if info is None:
            splits = word_splits(c)
            inis = tuple(dict.fromkeys(self.interned(initials(w)) for w in splits))
            info = (self.interned(fold(c)), inis, tuple(signature(w) for w in splits))
            self.cont_cache[c] = info
        return info

    def remove_slot(self, slot: int) -> bool:
        """Mark the live entry at ``slot`` dead: O(1), its sorted-array rows go stale and are skipped.
        True when dead entries now exceed half the live ones (and 1,024): time to rebuild compactly."""
        eid = self.eid_of[slot]
        self.eid_of[slot] = -1
        self.n_live -= 1
        self.alive[eid] = 0
        self.dead += 1
        return self.dead > _COMPACT_MIN_DEAD and self.dead > self.n_live // 2

    def flush(self) -> None:
        """Merge buffered additions into the sorted arrays and the trigram postings."""
        for s in (self.by_name, self.by_ini, self.by_cont, self.by_cini):
            s.flush()
        if self.tri_pending:
            self.index_trigrams(self.tri_pending)
            self.tri_pending = []

    def index_trigrams(self, eids: list[int]) -> None:
        """Append ``eids`` (ascending, above every indexed id) to the trigram postings of
        their folded names: a Python loop for a few, one numpy pass for a bulk load."""
        tri, fnames = self.tri, self.fnames
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

    def install_trigrams(self, terms: list[str], offsets: np.ndarray, ids: np.ndarray) -> None:
        """The trigram postings: ``ids[offsets[i]:offsets[i + 1]]`` for ``terms[i]``."""
        raw = np.ascontiguousarray(ids, dtype="<i4").tobytes()
        bounds = (4 * offsets).tolist()
        tri = self.tri
        for i, t in enumerate(terms):
            post = tri[t] = array("i")
            post.frombytes(raw[bounds[i] : bounds[i + 1]])

    def live(self, ids: np.ndarray) -> np.ndarray:
        """``ids`` without the dead ones."""
        if self.dead and ids.size:
            ids = ids[np.frombuffer(self.alive, dtype=np.uint8)[ids] == 1]
        return ids
