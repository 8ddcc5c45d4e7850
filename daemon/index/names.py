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

The parts, by job: how names and queries are cut into words (:mod:`daemon.index.names_words`),
the entries as columns and their upkeep (:mod:`daemon.index.names_table`: additions buffered and
merged before the next search, removals marking the entry dead, the index compacted when dead
entries exceed half the live ones), the matching and ordering of a query
(:mod:`daemon.index.names_match`) and the saved forms (:mod:`daemon.index.names_files`:
:meth:`SymbolIndex.save` writes the columns as files and :meth:`SymbolIndex.load` reads them back
with no per-entry work).

Not thread-safe: the daemon serialises calls. Build, load and search costs: ``docs/ranking.md``
("Names channel costs").
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np

from . import names_match
from .names_files import (
    SEP,
    SymbolError,
    SymbolState,
    read_columns,
    state_of,
    table_from_state,
    write_columns,
)
from .names_table import NameTable
from .names_words import clean_query, is_identifier_query

__all__ = ["SymbolError", "SymbolIndex", "SymbolState", "api_boost"]


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


class SymbolIndex:
    """Name index over entries ``slot → (name, containers, kind, boost)``; see the module doc.
    Keyed by the chunk store's slots only (a string key is a ``TypeError``)."""

    def __init__(self) -> None:
        self._table = NameTable()

    # --- size ----------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._table.n_live

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
        return not isinstance(key, str) and self._table.eid(self._slot_for(key)) >= 0

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
        compared at :data:`~daemon.index.names_table.BOOST_RESOLUTION` (see :func:`api_boost`).
        Raises ``ValueError`` for an empty name or a non-finite boost. Cost: O(len(name)) plus a
        buffered insert into four sorted arrays (merged before the next search).
        """
        if not name:
            raise ValueError(f"empty symbol name for key {key!r}")
        if (
            SEP in name
            or SEP in kind
            or (SEP in container if isinstance(container, str) else any(SEP in c for c in container))
        ):
            raise ValueError(f"control character U+001F in the symbol entry for key {key!r}")
        if not math.isfinite(boost):
            raise ValueError(f"boost must be finite, got {boost!r} for key {key!r}")
        slot = self._slot_for(key, create=True)
        if self._table.eid(slot) >= 0:
            self._remove_slot(slot)
        self._table.add(slot, name, (container,) if isinstance(container, str) else container, kind, boost)

    def remove(self, key: int) -> bool:
        """Remove the entry at slot ``key``; False if absent. O(1): its sorted-array rows go
        stale and are skipped; when stale entries exceed half the live ones (and 1,024), the
        index is rebuilt compactly (O(n log n), amortised O(log n) per removal)."""
        slot = self._slot_for(key)
        if self._table.eid(slot) < 0:
            return False
        self._remove_slot(slot)
        return True

    def _remove_slot(self, slot: int) -> None:
        t = self._table
        if t.remove_slot(slot):
            self._table = table_from_state(state_of(t))

    def get(self, key: int) -> tuple[str, tuple[str, ...], str, float] | None:
        """``(name, containers, kind, boost)`` of the entry at slot ``key``, or None."""
        t = self._table
        eid = t.eid(self._slot_for(key))
        if eid < 0:
            return None
        return t.names[eid], t.conts[eid], t.kinds[eid], t.boosts[eid]

    def flush(self) -> None:
        """Merge buffered additions into the sorted arrays and the trigram postings
        (searching does it by itself; call it to take the cost at a chosen moment)."""
        self._table.flush()

    # --- search --------------------------------------------------------------------------
    def exact_slots(self, name: str) -> np.ndarray:
        """Slots (int64, in name order) of the live entries whose name equals ``name`` after
        :func:`daemon.text.folding.fold` (case, ``ё``); a binary search of the sorted names, no
        scan. Used by :meth:`daemon.sources.docs.DocLinks.from_store`."""
        return names_match.exact_slots(self._table, name)

    def search(
        self,
        query: str,
        k: int,
        *,
        allow: np.ndarray | Callable | None = None,
        key_of: Callable[[int], str] | Sequence[str | None] | None = None,
    ) -> list[tuple]:
        """Best ``k`` entries for ``query``: ``[(slot, score, match_kind), ...]``, best first.

        ``match_kind`` is one of :data:`~daemon.index.names_match.MATCH_KINDS` (for a qualified query: the kind of the
        name part). Order: qualified matches before name-only ones; then the name's match kind;
        for qualified matches the container's kind (exact, prefix, camelhump); then ``boost``
        descending, the shorter name, the shorter key, the key. ``score`` is monotone in that
        order and readable: 40 / 30 / 20 / 10 for the four kinds plus ``boost / (1 + |boost|)``
        (in (-1, 1), so kinds never interleave), minus 40 for name-only hits of a qualified
        query. Surrounding whitespace and a trailing ``()`` are ignored. Queries that are not
        identifiers (see :func:`~daemon.index.names_words.is_identifier_query`), ``k <= 0`` or an empty index give
        ``[]``. ``allow``: a bool array indexed by slot (slots beyond it are not allowed) or
        a predicate on the slot (called in rank order until ``k`` pass). ``key_of(slot)``
        gives the key for the "shorter key, then key" tie-breaks (a sequence is indexed);
        without it ties go by slot.
        """
        q = clean_query(query)
        if k <= 0 or not self._table.n_live or not is_identifier_query(q):
            return []
        if key_of is not None and not callable(key_of):
            key_of = key_of.__getitem__
        return names_match.search(self._table, q, k, allow, key_of)  # type: ignore[arg-type]

    # --- persistence ---------------------------------------------------------------------
    def to_state(self) -> SymbolState:
        """Snapshot of the live entries in insertion order, with the derived structures and
        their slots (msgspec-encodable; see :class:`SymbolState`; the daemon saves column
        files instead: :meth:`save`)."""
        return state_of(self._table)

    def save(self, folder: Path | str) -> None:
        """Write the index into ``folder`` (created if missing) as column files, one
        ``.npy`` each, then ``header.json`` (format, layout, counts, byte size and CRC-32 of
        every file): the name, folded-name and signature columns as one UTF-8 text plus
        character offsets each; kinds, initials, folded containers and container tuples as
        ``uint32`` ids into small tables of distinct values; slots, boosts, container rows,
        the four sorted id arrays and the trigram postings as raw arrays. Compacts first when
        entries are dead. Files are fsynced; the caller makes the folder's appearance
        atomic."""
        t = self._table
        t.flush()
        if t.dead:
            t = self._table = table_from_state(state_of(t))
        write_columns(t, Path(folder))

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
            index._table = read_columns(folder, mmap, verify)
            return index
        except SymbolError:
            raise
        except (OSError, KeyError, TypeError, ValueError, UnicodeDecodeError) as exc:
            raise SymbolError(f"names index in {folder}: {exc}") from exc

    @classmethod
    def from_state(cls, state: SymbolState) -> SymbolIndex:
        """Rebuild from :meth:`to_state` output; ``ValueError`` if the state is of another
        layout (:data:`~daemon.index.names_files.STATE_LAYOUT`), holds string keys (the removed compatibility path),
        the columns differ in length, a slot repeats, a name is empty or the derived arrays
        do not fit the entries."""
        if state.keys:
            raise ValueError("symbol state with string keys: the index is keyed by chunk slots only")
        index = cls()
        index._table = table_from_state(state)
        return index
