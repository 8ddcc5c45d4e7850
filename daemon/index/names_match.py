"""The matching of one query in the names channel (:mod:`daemon.index.names`): which entries match
and in which order.

Over a :class:`~daemon.index.names_table.NameTable`: exact and prefix matches are a range of the ids
sorted by folded name, O(log n + matches); CamelHump candidates come from the ids sorted by word
initials (``ЗнРекОб`` looks up the initials prefix ``зро``, or the names starting with ``зн`` if
those are fewer) and are verified; substrings from the rarest trigrams of the query, verified;
qualified queries walk whichever side has fewer candidates, the container's entries or the name's
matches. Inside a kind the entries come in the order of their composite rank (boost, name length)
and then the caller's key, sorted lazily in batches until ``k`` results are out (:func:`search`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from daemon.text.folding import fold, split_words

from .names_table import NameTable
from .names_words import ACRONYM_RE, hump_matcher, humps

#: Match kinds, best first. An acronym query also has ``part`` (the acronym is a word of the
#: name, ``СуммаНДС`` for ``НДС``), between prefix and camelhump (:data:`EMIT_KINDS`).
MATCH_KINDS = ("exact", "prefix", "camelhump", "substring")
#: The kinds by their rank in the search (index 4: the acronym's word-part tier).
EMIT_KINDS = (*MATCH_KINDS, "part")
#: Base score per kind; the returned score is base + boost term (see ``SymbolIndex.search``).
_KIND_BASE = {"exact": 40.0, "prefix": 30.0, "camelhump": 20.0, "substring": 10.0, "part": 25.0}
#: Qualified queries: results that match the name part but not the container sit this much lower.
_UNQUALIFIED_PENALTY = 40.0

#: Substring scan: minimum query length and the most matches collected.
SUBSTRING_MIN_LEN = 3
SUBSTRING_MAX_HITS = 1000


def exact_slots(t: NameTable, name: str) -> np.ndarray:
    """Slots (int64, in name order) of the live entries whose name equals ``name`` after
    :func:`daemon.text.folding.fold` (case, ``ё``); a binary search of the sorted names, no
    scan. Used by :meth:`daemon.sources.docs.DocLinks.from_store`."""
    t.by_name.flush()  # the other sorted arrays and trigrams wait for the next search
    fq = fold(name)
    lo, hi = t.by_name.prefix_range(fq)
    ids = t.live(t.by_name.view(lo, t.by_name.exact_end(fq, lo, hi)))
    return np.frombuffer(t.slot, dtype=np.uint32)[ids].astype(np.int64) if ids.size else np.zeros(0, dtype=np.int64)


def name_tiers(t: NameTable, fq: str, q_humps: list[str]) -> Iterator[tuple[int, np.ndarray]]:
    """Lazily, ``(kind rank, live ids)`` for exact, prefix, camelhump, substring matches of
    folded ``fq``; each kind is computed only when the consumer asks for it (so the
    substring scan runs only when the better kinds gave fewer results than wanted)."""
    lo, hi = t.by_name.prefix_range(fq)
    mid = t.by_name.exact_end(fq, lo, hi)
    yield 0, t.live(t.by_name.view(lo, mid))
    yield 1, t.live(t.by_name.view(mid, hi))
    hump = camelhump(t, fq, q_humps) if len(q_humps) >= 2 else np.zeros(0, dtype=np.int64)
    yield 2, hump
    if len(fq) >= SUBSTRING_MIN_LEN:
        yield 3, substring(t, fq, exclude=hump)


def camelhump(t: NameTable, fq: str, q_humps: list[str]) -> np.ndarray:
    """Live ids whose words start with the humps (and whose name does not start with
    ``fq``). Candidates: the smaller of "initials start with the humps' initials" and
    "name starts with the first hump"; each is verified."""
    ilo, ihi = t.by_ini.prefix_range("".join(h[0] for h in q_humps))
    nlo, nhi = t.by_name.prefix_range(q_humps[0])
    if ihi - ilo <= nhi - nlo:
        cand = np.unique(t.by_ini.view(ilo, ihi) // 2)
    else:
        cand = t.by_name.view(nlo, nhi)
    cand = t.live(cand)
    if not cand.size:
        return cand
    sigs = t.sigs.take(cand.tolist())
    # each distinct signature is matched once: one method name recurs in many modules
    # (a form's event handlers in every form)
    distinct = set(sigs)
    rx = hump_matcher(q_humps, len(distinct))
    ok = {a for a in distinct if rx(a)}
    hit = np.fromiter((a in ok for a in sigs), dtype=bool, count=len(sigs))
    # the second word splitting, for the entries that have one (few names do)
    again = np.flatnonzero(~hit & t.sigs2.nonempty(cand))
    if again.size:
        sigs2 = t.sigs2.take(cand[again].tolist())
        ok2 = {b for b in set(sigs2) if rx(b)}
        hit[again[np.fromiter((b in ok2 for b in sigs2), dtype=bool, count=len(sigs2))]] = True
    found = cand[hit]
    # names that start with fq are the prefix tier's: the ids of its sorted range
    lo, hi = t.by_name.prefix_range(fq)
    if hi > lo and found.size:
        found = found[~np.isin(found, t.by_name.view(lo, hi))]
    return found.astype(np.int64, copy=False)


def substring(t: NameTable, fq: str, exclude: np.ndarray) -> np.ndarray:
    """Live ids whose folded name contains ``fq`` (3+ characters) but does not start
    with it, minus ``exclude``; at most :data:`SUBSTRING_MAX_HITS`.

    Candidates come from the trigram postings: the rarest trigram of ``fq``, intersected
    with the next rarest while that stays cheap; each candidate is verified."""
    posts = []
    tri = t.tri
    for g in {fq[i : i + 3] for i in range(len(fq) - 2)}:
        post = tri.get(g)
        if post is None:
            return np.zeros(0, dtype=np.int64)
        posts.append(post)
    posts.sort(key=len)
    cand = np.frombuffer(posts[0], dtype=np.int32).astype(np.int64)
    for post in posts[1:]:
        if len(post) > 16 * cand.size:
            break
        cand = np.intersect1d(cand, np.frombuffer(post, dtype=np.int32), assume_unique=True)
    cand = t.live(cand)
    el = cand.tolist()
    hits = [e for e, f in zip(el, t.fnames.take(el), strict=False) if fq in f and not f.startswith(fq)]
    ids = np.asarray(hits[:SUBSTRING_MAX_HITS], dtype=np.int64)
    if exclude.size and ids.size:
        ids = ids[~np.isin(ids, exclude)]
    return ids


def container_ids(t: NameTable, cq: str) -> tuple[np.ndarray, np.ndarray]:
    """(ids, container kind rank 0 exact / 1 prefix / 2 camelhump) for container query."""
    fcq = fold(cq)
    lo, hi = t.by_cont.prefix_range(fcq)
    rows = t.by_cont.view(lo, hi)
    texts = t.crow_text.vals
    ranks = np.fromiter((0 if texts[r] == fcq else 1 for r in rows.tolist()), dtype=np.int64, count=rows.size)
    ids = np.frombuffer(t.crow_eid, dtype=np.int64)[rows] if rows.size else rows
    q_humps = humps(cq)
    if len(q_humps) >= 2:
        ilo, ihi = t.by_cini.prefix_range("".join(h[0] for h in q_humps))
        if ihi > ilo:
            crow = t.by_cini.view(ilo, ihi)
            cand = np.unique(np.frombuffer(t.cini_eid, dtype=np.int64)[crow])
            rx = hump_matcher(q_humps, cand.size)
            info = t.container_info
            extra = [e for e in cand.tolist() if any(rx(sig) for c in t.conts[e] for sig in info(c)[2])]
            if extra:
                ids = np.concatenate((ids, np.asarray(extra, dtype=np.int64)))
                ranks = np.concatenate((ranks, np.full(len(extra), 2, dtype=np.int64)))
    if ids.size:
        # best rank per id
        order = np.lexsort((ranks, ids))
        ids, ranks = ids[order], ranks[order]
        first = np.concatenate(([True], ids[1:] != ids[:-1]))
        ids, ranks = ids[first], ranks[first]
        if t.dead:
            live = np.frombuffer(t.alive, dtype=np.uint8)[ids] == 1
            ids, ranks = ids[live], ranks[live]
    return ids, ranks


def ordered(t: NameTable, ids: np.ndarray, key_of: Callable[[int], str] | None) -> Iterator[int]:
    """Yield ``ids`` in rank order (composite, then the shorter key, then the key; by
    slot without ``key_of``), sorting lazily in batches."""
    comp = np.frombuffer(t.comp, dtype=np.int64)
    slot = t.slot
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


def part_ids(t: NameTable, fq: str) -> np.ndarray:
    """Live ids whose name has the folded word ``fq`` as one of its word parts
    (:func:`daemon.text.folding.split_words`), the name not starting with it (the prefix
    tier has those). Candidates from the trigram postings: a 2-letter ``fq`` has none."""
    if len(fq) < SUBSTRING_MIN_LEN:
        return np.zeros(0, dtype=np.int64)
    cand = substring(t, fq, np.zeros(0, dtype=np.int64))
    el = cand.tolist()
    hits = [e for e, n in zip(el, t.names.take(el), strict=True) if any(fold(w) == fq for w in split_words(n))]
    return np.asarray(hits, dtype=np.int64)


def qualified(
    t: NameTable, cq: str, fnq: str, nq_humps: list[str], k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Entries matching container part ``cq`` and name part ``fnq``: (ids, name kind
    ranks, container kind ranks). Walks whichever side has fewer candidates: the
    entries of the matching containers, or the entries matching the name."""
    fcq, c_humps = fold(cq), humps(cq)
    clo, chi = t.by_cont.prefix_range(fcq)
    c_size = chi - clo
    if len(c_humps) >= 2:
        ilo, ihi = t.by_cini.prefix_range("".join(h[0] for h in c_humps))
        c_size += ihi - ilo
    n_size = 1 << 62
    if fnq:
        nlo, nhi = t.by_name.prefix_range(fnq)
        n_size = nhi - nlo
        if len(nq_humps) >= 2:
            ilo, ihi = t.by_ini.prefix_range("".join(h[0] for h in nq_humps))
            n_size += ihi - ilo
    if c_size <= n_size:
        ids, cranks = container_ids(t, cq)
        nranks = name_ranks(t, ids, fnq, nq_humps)
        keep = nranks < 4
        return ids[keep], nranks[keep], cranks[keep]
    # name side: the name's matches, filtered by their containers
    out_ids: list[int] = []
    out_n: list[int] = []
    out_c: list[int] = []
    matcher = hump_matcher(c_humps, 1 << 30) if len(c_humps) >= 2 else None

    def collect(group: np.ndarray, nrank: int) -> None:
        for e in group.tolist():
            cr = cont_rank(t, e, fcq, matcher)
            if cr is not None:
                out_ids.append(e)
                out_n.append(nrank)
                out_c.append(cr)

    for nrank, group in name_tiers(t, fnq, nq_humps):
        if nrank == 3 and len(out_ids) >= k:
            break
        collect(group, nrank)
    return (
        np.asarray(out_ids, dtype=np.int64),
        np.asarray(out_n, dtype=np.int64),
        np.asarray(out_c, dtype=np.int64),
    )


def cont_rank(t: NameTable, e: int, fcq: str, matcher: Callable[[str], bool] | None) -> int | None:
    """Best container kind rank of entry ``e`` for folded container query ``fcq``."""
    best = None
    for c in t.conts[e]:
        fc, _, sigs = t.container_info(c)
        if fc == fcq:
            return 0
        if fc.startswith(fcq):
            best = 1
        elif best is None and matcher is not None and any(matcher(sig) for sig in sigs):
            best = 2
    return best


def name_ranks(t: NameTable, ids: np.ndarray, fnq: str, nq_humps: list[str]) -> np.ndarray:
    """Kind rank of each id's name against the name part (4 = no match)."""
    if not ids.size:
        return np.zeros(0, dtype=np.int64)
    if not fnq:
        return np.ones(ids.size, dtype=np.int64)  # empty name part: list the container
    fnames, sigs, sigs2 = t.fnames, t.sigs, t.sigs2
    rx = hump_matcher(nq_humps, ids.size) if len(nq_humps) >= 2 else None
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


class _Hits:
    """One search's results as they are collected, best first: ``(slot, score, match kind)``, up to
    ``k``. ``allow``: a bool mask indexed by slot (applied to each group of ids at once) or a
    predicate on the slot (called in rank order); ``key_of``: the caller's key of a slot, for the
    "shorter key, then key" tie-breaks."""

    __slots__ = ("allow", "k", "key_of", "mask", "out", "table")

    def __init__(
        self, t: NameTable, k: int, allow: np.ndarray | Callable | None, key_of: Callable[[int], str] | None
    ) -> None:
        self.table = t
        self.k = k
        self.key_of = key_of
        self.out: list[tuple[int, float, str]] = []
        self.mask = allow if isinstance(allow, np.ndarray) else None
        self.allow = None if isinstance(allow, np.ndarray) else allow

    def _allowed(self, ids: np.ndarray) -> np.ndarray:
        """``ids`` whose slot the mask allows (slots beyond it are not allowed)."""
        ok = self.mask
        slots = np.frombuffer(self.table.slot, dtype=np.uint32)[ids]
        keep = slots < ok.size
        keep[keep] = ok[slots[keep]]
        return ids[keep]

    def emit(self, ids: np.ndarray, nrank: int, name_only: bool) -> bool:
        """Append ``ids`` in rank order; True once ``k`` results are out."""
        kind = EMIT_KINDS[nrank]
        base = _KIND_BASE[kind] - (_UNQUALIFIED_PENALTY if name_only else 0.0)
        t, out, k, allow = self.table, self.out, self.k, self.allow
        slots, boosts = t.slot, t.boosts
        if self.mask is not None:
            ids = self._allowed(ids)
        for e in ordered(t, ids, self.key_of):
            slot = slots[e]
            if allow is not None and not allow(slot):
                continue
            b = boosts[e]
            out.append((slot, base + b / (1.0 + abs(b)), kind))
            if len(out) == k:
                return True
        return False


def search(
    t: NameTable, q: str, k: int, allow: np.ndarray | Callable | None, key_of: Callable[[int], str] | None
) -> list[tuple[int, float, str]]:
    """The best ``k`` entries for the cleaned identifier query ``q`` (``k > 0``), best first, as
    :meth:`daemon.index.names.SymbolIndex.search` describes them; buffered additions are merged
    first."""
    t.flush()
    hits = _Hits(t, k, allow, key_of)
    if "." in q:
        _search_qualified(t, q, hits)
    elif ACRONYM_RE.fullmatch(q):
        _search_acronym(t, q, hits)
    else:
        for nrank, group in name_tiers(t, fold(q), humps(q)):
            if group.size and hits.emit(group, nrank, False):
                break
    return hits.out


def _search_qualified(t: NameTable, q: str, hits: _Hits) -> None:
    """``<container>.<name>``: the qualified matches by name kind, then container kind; then, to
    fill ``k``, the name part alone (the container given up, :data:`_UNQUALIFIED_PENALTY` lower).
    A container that matches nothing is tried again by its last dotted part."""
    cq, _, nq = q.rpartition(".")
    fnq, nq_humps = fold(nq), humps(nq)
    ids, nranks, cranks = qualified(t, cq, fnq, nq_humps, hits.k)
    if not ids.size and "." in cq:
        ids, nranks, cranks = qualified(t, cq.rpartition(".")[2], fnq, nq_humps, hits.k)
    for nrank in range(4):
        for crank in range(3):
            sel = ids[(nranks == nrank) & (cranks == crank)]
            if sel.size and hits.emit(sel, nrank, False):
                return
    if fnq:
        for nrank, group in name_tiers(t, fnq, nq_humps):
            if ids.size and group.size:
                group = group[~np.isin(group, ids)]
            if group.size and hits.emit(group, nrank, True):
                return


def _search_acronym(t: NameTable, q: str, hits: _Hits) -> None:
    """An acronym is first a word: the names that hold it as a word part (СуммаНДС, СтавкаНДС)
    come after exact and prefix matches, before CamelHump expansions."""
    fq = fold(q)
    parts = np.zeros(0, dtype=np.int64)
    for nrank, group in name_tiers(t, fq, humps(q)):
        if nrank == 2:
            parts = part_ids(t, fq)
            if parts.size and hits.emit(parts, 4, False):
                return
        if parts.size and group.size:
            group = group[~np.isin(group, parts)]
        if group.size and hits.emit(group, nrank, False):
            return
