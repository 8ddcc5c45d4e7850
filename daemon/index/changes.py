"""The reconcile's vocabulary: the index settings (:class:`EngineConfig`), one file's new state
(:class:`FileUpdate`), what one reconcile changes (:class:`ChangeSet`) and did
(:class:`RefreshReport`), and :class:`Cancelled`.

Kept apart from the reconcile itself (:mod:`daemon.index.reconcile`) because the chunking
workers (:mod:`daemon.index.chunking`) and the journal (:mod:`daemon.index.snapshot`) read and
write these records too, and a worker process should import no more than it runs.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..contract import Chunk, Skip
from ..sources.ref_record import FileRefs
from ..sources.scan import ExportInfo

__all__ = ["Cancelled", "ChangeSet", "EngineConfig", "FileUpdate", "RefreshReport"]


class Cancelled(Exception):
    """:meth:`Engine.prepare` stopped because its ``cancel()`` said so (the daemon is
    stopping); nothing was changed, the reconcile runs again on the next start."""


class EngineConfig(msgspec.Struct, kw_only=True):
    """Index settings (a change of a lexical setting rebuilds the lexical index).

    * ``max_file_bytes``: larger files are skipped with reason ``too_large`` (8 MiB).
    * ``max_method_lines``: methods longer than this are split into parts (400 lines).
    * ``docs``: documentation folders inside the root (:func:`daemon.sources.docs.normalize_docs_dirs`).
    * ``stem``: Snowball stemming (PyStemmer, Russian + English) of word parts in BM25.
    * ``embed_max_chars``: size of the embedded method head (characters).
    * ``bm25_k1``, ``bm25_b``: BM25 Okapi parameters; ``b`` below the usual 0.75, since long
      methods are long because they do the work a question asks about.
    * ``references``: read the references (find usages) in the chunking pass; False only for
      measuring what they cost (``bsl-lens bench --no-references``): find usages then knows none.

    Why these values: ``docs/ranking.md``, "Index settings".
    """

    max_file_bytes: int = 8 * 2**20
    max_method_lines: int = 400
    docs: list[str] = []
    stem: bool = True
    embed_max_chars: int = 400
    bm25_k1: float = 1.2
    bm25_b: float = 0.3
    references: bool = True

    def lexical_fingerprint(self) -> str:
        """The settings that change the lexical index; a mismatch with the saved manifest
        means a lexical rebuild."""
        fp = f"lines={self.max_method_lines};stem={self.stem};k1={self.bm25_k1};b={self.bm25_b}"
        return fp if self.references else fp + ";refs=0"


class RefreshReport(msgspec.Struct, kw_only=True):
    """What one reconcile with the disk did."""

    files_seen: int = 0
    files_changed: int = 0
    files_removed: int = 0
    chunks_added: int = 0
    chunks_changed: int = 0  # text or attributes changed: re-indexed
    chunks_moved: int = 0  # only the line numbers changed (an edit above): record updated
    chunks_removed: int = 0
    skipped: list[Skip] = []
    seconds: float = 0.0
    changed_ids: list[str] = []  # chunks added or changed (their vectors are due)


class FileUpdate(msgspec.Struct):
    """One file's new state, computed by :meth:`Engine.prepare` outside the lock.
    ``chunks`` None: the content is unchanged (a ``touch``), only the stat is refreshed.
    ``tokens``: BM25 tokens of the chunks that are new or changed (not merely moved).
    ``refs``: the file's references (:mod:`daemon.index.refgraph`), read in the same pass: a
    module's record and, for a form module, its layout's; a binding descriptor's record; None:
    unchanged (or a file without references: docs pages, other descriptors)."""

    path: str
    kind: str
    digest: str
    size: int
    mtime_ns: int
    encoding: str
    chunks: list[Chunk] | None
    tokens: dict[str, list[str]] = {}
    deps: str = ""
    ino: int = 0
    ctime_ns: int = 0
    refs: list[FileRefs] | None = None


class ChangeSet(msgspec.Struct, kw_only=True):
    """What one reconcile changes (:meth:`Engine.prepare`), applied by :meth:`Engine.apply`.

    ``full``: a whole-export scan (its skip list replaces the old one; files not seen are
    removed); otherwise only ``paths`` and the subtrees of ``dirs`` were looked at.
    ``staged``: a first index (or a rebuild of an empty engine) built aside as the results
    arrived (:class:`daemon.index.apply.StagedIndex`: a chunk store and channels, no chunk held
    in ``updates``); :meth:`daemon.index.reconcile.Reconciler.apply` swaps it in whole. Never
    journaled. ``refs_rebuilt``: a full reconcile that read the references of every file (they
    were incomplete).
    """

    full: bool
    info: ExportInfo | None = None
    paths: tuple[str, ...] = ()
    dirs: tuple[str, ...] = ()
    updates: list[FileUpdate] = []
    removed: list[str] = []
    skipped: list[Skip] = []
    files_seen: int = 0
    seconds: float = 0.0
    staged: Any = None
    refs_rebuilt: bool = False
