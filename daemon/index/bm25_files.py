"""The on-disk format of :class:`daemon.index.bm25.BM25Index`: a folder of ``.npy`` column files
and a JSON header.

:func:`write_columns` writes each column straight from memory (no encoded copy), fsynced,
then ``header.json`` (format, parameters, counts, every file's byte size and CRC-32) last.
:func:`read_columns` and :func:`check_columns` open such a folder and check it, raising
:class:`BM25Error` naming the folder and the fault. The columns:

=====================  =======  ================================================================
file                   dtype    what
=====================  =======  ================================================================
``postings``           ``<u4``  ``(doc, tf)`` pairs grouped by term, docs ascending per term
``offsets``            ``<i8``  term id -> first pair in ``postings`` (``terms + 1``)
``slots``              ``<u4``  doc -> the caller's slot
``lengths``            ``<u4``  doc -> length in tokens
``vocab_blob``         ``u1``   the terms' UTF-8 bytes, in term id order
``vocab_off``          ``<i8``  term id -> offset in ``vocab_blob`` (``terms + 1``)
``vocab_hash``         ``<u8``  the terms' 64-bit hashes, sorted
``vocab_perm``         ``<u4``  the term ids in ``vocab_hash`` order
``doc_off``            ``<i8``  doc -> first entry in ``doc_terms`` (``docs + 1``)
``doc_terms``          ``<u2``  per doc its ascending term ids as 16-bit deltas
``doc_terms_xpos``     ``<i8``  positions in ``doc_terms`` whose delta is 2**16 or more
``doc_terms_xhi``      ``<u2``  those deltas' high 16 bits
=====================  =======  ================================================================
"""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from .bm25_postings import decode_doc_terms
from .storage import save_npy_synced

#: The format :func:`write_columns` writes and :func:`read_columns` accepts.
FORMAT = "bsl-lens.bm25"
FORMAT_VERSION = 2  # 2: doc -> terms as 16-bit deltas + exceptions (1: uint32 term ids)
HEADER_FILE = "header.json"
#: Columns a loaded index reads through a memory map (the per-document columns are copied into RAM).
MAPPED = ("postings", "offsets", "vocab_blob", "vocab_off", "doc_off", "doc_terms", "doc_terms_xpos", "doc_terms_xhi")


class BM25Error(ValueError):
    """A saved index that cannot be used: missing, damaged or of another format. The message
    names the folder and what is wrong; the owner logs it and rebuilds."""


def _expected(n_docs: int, n_terms: int, n_post: int) -> dict[str, tuple[str, tuple[int, ...] | None]]:
    """Column name -> (dtype, shape or None for any length) for the header's counts."""
    return {
        "doc_off": ("<i8", (n_docs + 1,)),
        "doc_terms": ("<u2", (n_post,)),
        "doc_terms_xpos": ("<i8", None),
        "doc_terms_xhi": ("<u2", None),
        "postings": ("<u4", (2 * n_post,)),
        "offsets": ("<i8", (n_terms + 1,)),
        "slots": ("<u4", (n_docs,)),
        "lengths": ("<u4", (n_docs,)),
        "vocab_blob": ("|u1", None),
        "vocab_off": ("<i8", (n_terms + 1,)),
        "vocab_hash": ("<u8", (n_terms,)),
        "vocab_perm": ("<u4", (n_terms,)),
    }


def same_dir(a: Path, b: Path) -> bool:
    """``a`` and ``b`` are one folder (False when ``a`` is gone: renamed or deleted)."""
    try:
        return a.samefile(b)
    except OSError:
        return False


def write_columns(folder: Path, cols: dict[str, np.ndarray], header: dict[str, Any]) -> None:
    """Write ``cols`` as ``<name>.npy`` into ``folder`` (created if missing), each fsynced,
    then ``header.json``: ``header`` plus ``files`` (each file's byte size and CRC-32)."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {name: save_npy_synced(folder / f"{name}.npy", arr) for name, arr in cols.items()}
    with open(folder / HEADER_FILE, "w", encoding="utf-8") as fh:
        json.dump({**header, "files": files}, fh, indent=1)
        fh.flush()
        os.fsync(fh.fileno())


def mapped_columns(folder: Path) -> dict[str, np.ndarray]:
    """The memory-mapped columns of a folder just written (:data:`MAPPED` and the vocabulary
    hash columns), read-only."""
    return {name: np.load(folder / f"{name}.npy", mmap_mode="r") for name in (*MAPPED, "vocab_hash", "vocab_perm")}


def read_columns(folder: Path, *, mmap: bool, verify: bool) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """``(header, columns)`` of a saved index (the header's ``k1`` and ``b`` as floats),
    checked: the header's format, each file's size, dtype and shape against the header's
    counts, and with ``verify`` each file's CRC-32. With ``mmap`` the columns are
    memory-mapped read-only. :class:`BM25Error` otherwise."""
    try:
        with open(folder / HEADER_FILE, encoding="utf-8") as fh:
            header = json.load(fh)
    except (OSError, ValueError) as exc:
        raise BM25Error(f"BM25 index in {folder}: cannot read {HEADER_FILE}: {exc}") from exc
    if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("version") != FORMAT_VERSION:
        raise BM25Error(f"BM25 index in {folder}: not format {FORMAT} v{FORMAT_VERSION}")
    try:
        n_docs, n_terms, n_post = int(header["docs"]), int(header["terms"]), int(header["postings"])
        header["k1"], header["b"] = float(header["k1"]), float(header["b"])
        files = header["files"]
        cols = {}
        for name, (dtype, shape) in _expected(n_docs, n_terms, n_post).items():
            cols[name] = _column(folder, name, files[name], dtype, shape, mmap=mmap, verify=verify)
    except (OSError, KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, BM25Error):
            raise
        raise BM25Error(f"BM25 index in {folder}: {exc}") from exc
    return header, cols


def _column(
    folder: Path, name: str, meta: dict, dtype: str, shape: tuple[int, ...] | None, *, mmap: bool, verify: bool
) -> np.ndarray:
    """One column file, checked against its header entry ``meta`` and the expected dtype and shape."""
    path = folder / f"{name}.npy"
    size = path.stat().st_size
    if size != int(meta["bytes"]):
        raise BM25Error(f"BM25 index in {folder}: {path.name} has {size} bytes, header says {meta['bytes']}")
    arr = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    if arr.dtype.str != dtype or arr.ndim != 1 or (shape is not None and arr.shape != shape):
        raise BM25Error(f"BM25 index in {folder}: {path.name} is {arr.dtype.str}{arr.shape}, expected {dtype}{shape}")
    if verify and zlib.crc32(memoryview(np.ascontiguousarray(arr)).cast("B")) != int(meta["crc32"]):
        raise BM25Error(f"BM25 index in {folder}: {path.name} fails its CRC-32")
    return arr


def check_columns(folder: Path, header: dict[str, Any], cols: dict[str, np.ndarray], *, verify: bool) -> None:
    """The columns agree with each other: offsets monotone and consistent with the postings,
    slots distinct, lengths summing to the header's total, the doc -> terms index well formed;
    with ``verify`` also every posting (doc in range, tf sums equal to the lengths).
    :class:`BM25Error` otherwise."""
    n_docs, n_post = int(header["docs"]), int(header["postings"])
    n_terms = int(header["terms"])
    off, post, slots, lengths = cols["offsets"], cols["postings"], cols["slots"], cols["lengths"]
    voff, vblob = cols["vocab_off"], cols["vocab_blob"]
    doc_off, xpos = cols["doc_off"], cols["doc_terms_xpos"]
    counts = np.diff(off)
    if (
        off[0] != 0
        or off[-1] != n_post
        or (counts.size and int(counts.min()) <= 0)
        or voff[0] != 0
        or voff[-1] != vblob.size
        or (n_terms and int(np.diff(voff).min()) < 0)
        or (n_docs and (int(slots.max()) >= 1 << 31 or int(np.bincount(slots).max()) > 1))
        or int(lengths.sum(dtype=np.int64)) != int(header.get("total_len", -1))
        or doc_off[0] != 0
        or doc_off[-1] != n_post
        or (n_docs and int(np.diff(doc_off).min()) < 0)
        or xpos.size != cols["doc_terms_xhi"].size
        or (xpos.size and not 0 <= int(xpos[0]) <= int(xpos[-1]) < n_post)
    ):
        raise BM25Error(f"BM25 index in {folder}: inconsistent columns (offsets, slots or lengths)")
    if verify and post.size:
        docs = post[0::2]
        if int(docs.max()) >= n_docs or not np.array_equal(
            np.bincount(docs, weights=post[1::2], minlength=n_docs), lengths
        ):
            raise BM25Error(f"BM25 index in {folder}: postings do not match the document lengths")


def check_doc_terms(folder: Path, cols: dict[str, np.ndarray], n_docs: int, n_terms: int) -> None:
    """Every term id of the doc -> terms index is a term of the index (one pass over all
    docs: the ``verify`` check of a load). :class:`BM25Error` otherwise."""
    top = 0  # the largest term id (each doc's last: ascending)
    for d in range(n_docs):
        ids = decode_doc_terms(cols["doc_off"], cols["doc_terms"], cols["doc_terms_xpos"], cols["doc_terms_xhi"], d)
        top = max(top, ids[-1] if ids else 0)
    if top >= n_terms:
        raise BM25Error(f"BM25 index in {folder}: doc -> terms index out of range")
