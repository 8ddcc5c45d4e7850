"""The team's shared embedding cache: PostgreSQL with pgvector (the README's team set-up).

One table holds the passage vectors of every text any member embedded, keyed by (model
fingerprint, text hash)::

    bsl_lens_embeddings(model text, text_hash bytea(16), vec halfvec(384), created_at)
        primary key (model, text_hash)
    bsl_lens_meta(key text primary key, value text)     -- schema_version, dim, vector_type

Both are created on first use by a read-write client (``CREATE EXTENSION IF NOT EXISTS
vector`` too, when the role may); ``halfvec`` when the server's pgvector is 0.7 or newer
(768 bytes a row for 384 dims), else ``vector`` (1536 bytes). A read-only client (``--shared-cache-mode
ro``, or a role that may not INSERT: it switches to read-only on the first refusal) only
looks vectors up.

The daemon, ``bsl-lens index`` and ``bsl-lens embed`` look the pending text hashes up in
batches of :data:`LOOKUP_BATCH` (``text_hash = ANY(%s)``, one bound array) before embedding,
embed only the misses and write those back (``ON CONFLICT DO NOTHING``: two writers of one
text are fine). Every SQL value is a bound parameter; the identifiers are this module's
constants.

Faults never stop the caller: a server that is down, slow (connect timeout
:data:`CONNECT_TIMEOUT_S`, statement timeout :data:`STATEMENT_TIMEOUT_MS`), restarted, a
wrong password, a missing extension, tables of another schema version or another dimension
-> the lookup returns what it has (usually nothing), the caller embeds locally, the fault is
logged once (and its recovery), :meth:`SharedCache.status` reports it, and the next try
comes after a back-off (:data:`RETRY_MIN_S` doubling up to :data:`RETRY_MAX_S`). Vectors of
another model are never returned: the fingerprint is part of the key.

No vector is lost to a fault: what a read-write client embeds while the server cannot take
it (down, in the back-off, a failed write) goes to the *unsent* journal in the index dir
(:class:`Unsent`, ``shared-unsent-<model>.bin``), which is sent first thing once the server
answers again (the next lookup or write), at start (:meth:`SharedCache.drain`: the daemon's
dense thread, ``bsl-lens index`` and ``bsl-lens embed``) and by the daemon while idle;
``status`` counts it (``unsent``). The DSN's password is
never logged nor reported (:func:`mask_dsn`); libpq's ``~/.pgpass``, ``PGPASSWORD`` and
``PGSERVICE`` work as usual.

Needs the optional ``shared`` extra (``pip install 'bsl-lens[shared]'``: psycopg 3 and
pgvector); without it the cache reports the missing package as its fault.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..contract import SharedCacheStatus
from . import journal

log = logging.getLogger(__name__)

#: Version of the two tables' layout; a table of another version is not touched.
SCHEMA_VERSION = 1
TABLE = "bsl_lens_embeddings"
META_TABLE = "bsl_lens_meta"
MODES = ("rw", "ro")
#: hashes per lookup statement (one bound ``bytea[]``): ~32 KB of parameters, ~1.5 MB of halfvecs back.
LOOKUP_BATCH = 2000
#: seconds libpq waits for a connection (a server that is down or unreachable).
CONNECT_TIMEOUT_S = 5
#: milliseconds one statement may run (a slow or locked server): then the caller embeds locally.
STATEMENT_TIMEOUT_MS = 15000
#: back-off after a fault: the first retry after this many seconds, doubling ...
RETRY_MIN_S = 5.0
#: ... up to this many.
RETRY_MAX_S = 300.0
#: seconds a hash found missing is not looked up again (the bulk prefetch and the batch
#: that embeds it right after would otherwise ask twice); a CI fill meanwhile is seen after this.
MISS_TTL_S = 300.0
#: smallest pgvector with ``halfvec``.
HALFVEC_SINCE = (0, 7)
#: rows per statement when the unsent journal is sent (:meth:`SharedCache.drain`).
DRAIN_BATCH = 1000

# user:password@ up to the LAST @ of the authority: a password with an unencoded @ stays hidden
_URL_PASS = re.compile(r"^(\w+://[^:/@]*):[^/?#]*@")
_KV_PASS = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|(?:\\.|\S)+)", re.IGNORECASE)
_Q_PASS = re.compile(r"([?&]password=)[^&]*", re.IGNORECASE)


def mask_dsn(dsn: str) -> str:
    """``dsn`` with any password replaced by ``***``: the URL form
    (``postgresql://user:secret@host/db`` -> ``postgresql://user:***@host/db``), a
    ``?password=`` query parameter and the key/value form (``password=secret``). The only
    form of the DSN that goes to logs, status and error messages."""
    s = dsn.strip()
    if "://" in s:
        return _Q_PASS.sub(r"\1***", _URL_PASS.sub(r"\1:***@", s))
    return _KV_PASS.sub(r"\1***", s)


def _scrub(text: str, dsn: str) -> str:
    """An error message with the DSN and its password taken out (libpq may echo them)."""
    from urllib.parse import unquote, urlsplit

    out = text.replace(dsn, mask_dsn(dsn))
    secrets = []
    m = _KV_PASS.search(dsn)
    if m:
        secrets.append(m.group(2).strip("'"))
    try:
        pw = urlsplit(dsn).password
        if pw:
            secrets += [pw, unquote(pw)]
    except ValueError:
        pass
    for s in secrets:
        if len(s) >= 3:
            out = out.replace(s, "***")
    return " ".join(out.split())[:400]


def unsent_path(index_dir: str | Path, fingerprint: str) -> Path:
    """The unsent journal of model ``fingerprint`` in ``index_dir``: named by the hash of the
    fingerprint, as the model's embedding cache (``embeddings-<tag>.bin``) is."""
    tag = hashlib.sha256(fingerprint.encode("utf-8")).hexdigest()[:12]
    return Path(index_dir) / f"shared-unsent-{tag}.bin"


class Unsent:
    """The vectors a read-write client embedded while the shared cache could not take them,
    kept in a journal file (:mod:`daemon.index.journal` frames: a count, the raw text hashes,
    the float32 vectors; 16 + 4 x dim bytes a vector) until they are sent. Loaded at
    construction (a damaged tail is dropped with a logged warning, as any journal's); the
    hashes are held in memory, the vectors are read back from the file when sent. Not
    thread-safe (:class:`SharedCache` calls it under its lock); one process per index dir."""

    def __init__(self, path: str | Path, dim: int) -> None:
        self.path = Path(path)
        self.dim = int(dim)
        self.hashes: dict[str, None] = {}
        gen = journal.generation_of(self.path)
        if gen is not None:
            for payload in journal.read(self.path, gen):
                for h, _ in self._decode(payload):
                    self.hashes[h] = None

    def __len__(self) -> int:
        return len(self.hashes)

    def _encode(self, hashes: Sequence[str], vectors: np.ndarray) -> bytes:
        raw = b"".join(bytes.fromhex(h) for h in hashes)
        return len(hashes).to_bytes(4, "little") + raw + np.ascontiguousarray(vectors, dtype="<f4").tobytes()

    def _decode(self, payload: bytes) -> list[tuple[str, np.ndarray]]:
        n = int.from_bytes(payload[:4], "little")
        if len(payload) != 4 + n * (16 + 4 * self.dim):
            log.warning("shared cache: unsent journal %s holds vectors of another dimension; ignored", self.path)
            return []
        keys = payload[4 : 4 + 16 * n]
        vecs = np.frombuffer(payload, dtype="<f4", offset=4 + 16 * n).reshape(n, self.dim)
        return [(keys[i * 16 : i * 16 + 16].hex(), vecs[i]) for i in range(n)]

    def add(self, hashes: Sequence[str], vectors: np.ndarray) -> None:
        """Append ``vectors`` (``(len(hashes), dim)``) under ``hashes``; ``OSError`` when the
        file cannot be written."""
        if not len(hashes):
            return
        if journal.generation_of(self.path) is None:
            journal.reset(self.path, journal.new_generation())
        journal.append(self.path, self._encode(hashes, vectors))
        for h in hashes:
            self.hashes[h] = None

    def items(self) -> dict[str, np.ndarray]:
        """``{hash: (dim,) float32}`` of every unsent vector, read from the file."""
        gen = journal.generation_of(self.path)
        out: dict[str, np.ndarray] = {}
        for payload in journal.read(self.path, gen) if gen else []:
            for h, v in self._decode(payload):
                if h in self.hashes:
                    out[h] = np.array(v, dtype=np.float32)
        return out

    def keep(self, left: dict[str, np.ndarray]) -> None:
        """Rewrite the journal with only ``left`` (``{hash: vector}``); remove it when empty."""
        if not left:
            self.hashes.clear()
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass
            return
        keys = list(left)
        journal.write(self.path, journal.new_generation(), [self._encode(keys, np.stack([left[k] for k in keys]))])
        self.hashes = dict.fromkeys(keys)


class Incompatible(Exception):
    """The server answers but cannot serve this client: no pgvector, tables of another
    schema version or dimension, no tables yet for a read-only client."""


class SharedCache:
    """A client of the shared embedding cache for one model (``fingerprint``, ``dim``).

    Thread-safe (one connection behind a lock). Never raises from :meth:`lookup` /
    :meth:`store`: a fault is recorded (:meth:`status`), logged once, and retried after a
    back-off. ``mode``: ``"rw"`` (look up and write back) or ``"ro"`` (look up only).
    Timeouts and back-off in seconds; defaults from the module constants. ``unsent``: the
    file of the unsent journal (:class:`Unsent`, :func:`unsent_path`), None for none (what
    cannot be written is then lost to the shared cache). ``ValueError`` for a bad mode or a
    DSN libpq cannot parse (the message never shows the DSN).
    """

    def __init__(
        self,
        dsn: str,
        *,
        fingerprint: str,
        dim: int,
        mode: str = "rw",
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        statement_timeout_ms: int = STATEMENT_TIMEOUT_MS,
        retry_min_s: float = RETRY_MIN_S,
        retry_max_s: float = RETRY_MAX_S,
        unsent: str | Path | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"shared cache mode must be one of {', '.join(MODES)}, got {mode!r}")
        if not dsn or not dsn.strip():
            raise ValueError("shared cache: empty DSN")
        _check_parses(dsn.strip())
        self.dsn = dsn.strip()
        self.url = mask_dsn(self.dsn)
        self.fingerprint = fingerprint
        self.dim = int(dim)
        self.mode = mode
        self.write_denied = False  # the role may not INSERT: read-only from then on
        self.connect_timeout_s = connect_timeout_s
        self.statement_timeout_ms = int(statement_timeout_ms)
        self.retry_min_s = retry_min_s
        self.retry_max_s = retry_max_s
        self.hits = 0
        self.misses = 0
        self.written = 0
        self.unreached = 0  # hashes not looked up because the server was not usable
        self.bad_rows = 0  # rows of another length (a damaged row): ignored
        self.last_error: str | None = None
        self.last_error_at: float | None = None
        self.state = "not connected"  # not connected | ok | down | incompatible
        self.vector_type: str | None = None
        self.server: str | None = None
        self._conn = None
        self._failures = 0
        self._next_try = 0.0
        self._logged: str | None = None
        self._missed: dict[str, float] = {}  # hash -> monotonic time it was missing
        self._lock = threading.Lock()
        self.unsent: Unsent | None = None
        if unsent is not None:  # loaded in ro mode too: status counts what a read-write run left
            self.unsent = Unsent(unsent, self.dim)
            if len(self.unsent):
                log.info("shared embedding cache: %d vectors not yet written (%s)", len(self.unsent), self.unsent.path)

    # ------------------------------------------------------------------ connection
    def _connect(self):
        import psycopg
        from psycopg import sql

        conn = psycopg.connect(
            self.dsn,
            connect_timeout=max(1, int(round(self.connect_timeout_s))),
            autocommit=True,
            application_name="bsl-lens",
            options=f"-c statement_timeout={self.statement_timeout_ms}",
        )
        try:
            self._check_schema(conn, psycopg, sql)
            from pgvector.psycopg import register_vector

            register_vector(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _check_schema(self, conn, psycopg, sql) -> None:
        """Make sure the extension and both tables exist (creating them in ``rw`` mode) and
        fit this client; :class:`Incompatible` when not."""
        row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = %s", ("vector",)).fetchone()
        if row is None:
            if self.mode == "ro":
                raise Incompatible("the pgvector extension is not installed in this database (CREATE EXTENSION vector)")
            try:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            except psycopg.Error as exc:
                raise Incompatible(
                    "the pgvector extension is not installed in this database and this role cannot create it "
                    f"({exc.sqlstate}: {_first_line(exc)})"
                ) from None
            row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = %s", ("vector",)).fetchone()
        ext = row[0]
        version = tuple(int(p) for p in re.findall(r"\d+", ext)[:2])
        vtype = "halfvec" if version >= HALFVEC_SINCE else "vector"
        self.server = f"PostgreSQL {conn.info.server_version // 10000}, pgvector {ext}"
        exists = conn.execute("SELECT to_regclass(%s), to_regclass(%s)", (META_TABLE, TABLE)).fetchone()
        if exists[0] is None or exists[1] is None:
            if self.mode == "ro" or self.write_denied:
                raise Incompatible(
                    "the shared cache has no tables yet (a read-write client, e.g. the CI fill, creates them)"
                )
            with conn.transaction():
                # one creator at a time: CREATE TABLE IF NOT EXISTS races on pg_type otherwise
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (0x62736C6C656E73,))
                conn.execute(
                    sql.SQL("CREATE TABLE IF NOT EXISTS {} (key text PRIMARY KEY, value text NOT NULL)").format(
                        sql.Identifier(META_TABLE)
                    )
                )
                for k, v in (("schema_version", str(SCHEMA_VERSION)), ("dim", str(self.dim)), ("vector_type", vtype)):
                    conn.execute(
                        sql.SQL("INSERT INTO {} (key, value) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING").format(
                            sql.Identifier(META_TABLE)
                        ),
                        (k, v),
                    )
                conn.execute(
                    sql.SQL(
                        "CREATE TABLE IF NOT EXISTS {} (model text NOT NULL, text_hash bytea NOT NULL,"
                        " vec {} NOT NULL, created_at timestamptz NOT NULL DEFAULT now(),"
                        " PRIMARY KEY (model, text_hash))"
                    ).format(sql.Identifier(TABLE), sql.SQL(f"{vtype}({int(self.dim)})"))
                )
        meta = dict(conn.execute(sql.SQL("SELECT key, value FROM {}").format(sql.Identifier(META_TABLE))).fetchall())
        if meta.get("schema_version") != str(SCHEMA_VERSION):
            raise Incompatible(
                f"the shared cache tables are of schema version {meta.get('schema_version')!r}; "
                f"this bsl-lens reads version {SCHEMA_VERSION}"
            )
        col = conn.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
            " WHERE attrelid = to_regclass(%s) AND attname = %s AND NOT attisdropped",
            (TABLE, "vec"),
        ).fetchone()
        m = re.fullmatch(r"(halfvec|vector)\((\d+)\)", col[0] if col else "")
        if m is None:
            raise Incompatible(f"the column {TABLE}.vec is {col[0] if col else 'missing'}, not halfvec(N) or vector(N)")
        if int(m.group(2)) != self.dim:
            raise Incompatible(f"the shared cache holds vectors of dimension {m.group(2)}; this model makes {self.dim}")
        self.vector_type = m.group(0)

    def _usable(self) -> bool:
        """Connected and compatible; connects when the back-off allows. Under the lock."""
        if self._conn is not None and not self._conn.closed:
            return True
        if time.monotonic() < self._next_try:
            return False
        try:
            self._conn = self._connect()
        except Exception as exc:  # psycopg.Error, OSError, Incompatible, ImportError
            self._fault(exc)
            return False
        if self.state != "ok" and self._logged:
            log.warning("shared embedding cache %s reachable again (%s)", self.url, self.server)
        elif self.state != "ok":
            log.info(
                "shared embedding cache %s: %s, %s, mode %s",
                self.url,
                self.server,
                self.vector_type,
                self.effective_mode,
            )
        self.state = "ok"
        self._failures = 0
        self._logged = None
        self.last_error = self.last_error_at = None  # the fault is over (the log keeps it)
        return True

    def _fault(self, exc: BaseException) -> None:
        """Record a fault, close the connection, schedule the retry; log once per kind."""
        if isinstance(exc, ImportError):
            msg = f"the shared cache needs psycopg and pgvector (pip install 'bsl-lens[shared]'): {exc}"
        else:
            msg = _scrub(f"{type(exc).__name__}: {_first_line(exc)}", self.dsn)
        self.state = "incompatible" if isinstance(exc, (Incompatible, ImportError)) else "down"
        self.last_error = msg
        self.last_error_at = time.time()
        self._failures += 1
        wait = (
            self.retry_max_s
            if self.state == "incompatible"
            else min(self.retry_max_s, self.retry_min_s * 2 ** (self._failures - 1))
        )
        self._next_try = time.monotonic() + wait
        kind = f"{self.state}:{type(exc).__name__}"
        if self._logged != kind:
            log.warning(
                "shared embedding cache %s unusable, embedding locally (retry in %.0f s): %s", self.url, wait, msg
            )
            self._logged = kind
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:
                pass
            self._conn = None

    @property
    def effective_mode(self) -> str:
        """``rw`` or ``ro`` (``ro`` also when the role was refused an INSERT)."""
        return "ro" if self.mode == "ro" or self.write_denied else "rw"

    # ------------------------------------------------------------------ lookups and writes
    def lookup(self, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """The shared vectors of ``hashes`` (:func:`daemon.index.embed_cache.text_hash` hex strings) of
        this model: ``{hash: (dim,) float32}``; absent ones are misses. In batches of
        :data:`LOOKUP_BATCH`; a fault returns what the earlier batches found. A hash that
        was missing less than :data:`MISS_TTL_S` ago is not asked again (nor counted)."""
        now = time.monotonic()
        out: dict[str, np.ndarray] = {}
        with self._lock:
            hashes = [h for h in dict.fromkeys(hashes) if now - self._missed.get(h, -1e18) > MISS_TTL_S]
            if not hashes:
                return out
            if not self._usable():
                self.unreached += len(hashes)
                return out
            done = 0
            try:
                from psycopg import sql

                q = sql.SQL("SELECT text_hash, vec FROM {} WHERE model = %s AND text_hash = ANY(%s)").format(
                    sql.Identifier(TABLE)
                )
                with self._conn.cursor(binary=True) as cur:
                    for i in range(0, len(hashes), LOOKUP_BATCH):
                        batch = hashes[i : i + LOOKUP_BATCH]
                        cur.execute(q, (self.fingerprint, [bytes.fromhex(h) for h in batch]))
                        for key, vec in cur:
                            arr = np.asarray(vec.to_numpy(), dtype=np.float32)
                            if arr.shape != (self.dim,) or not np.isfinite(arr).all():
                                self.bad_rows += 1
                                continue
                            out[bytes(key).hex()] = arr
                        done += len(batch)
            except Exception as exc:
                self._fault(exc)
                self.unreached += len(hashes) - done
            self.hits += len(out)
            self.misses += done - len(out)
            if len(self._missed) > 1_000_000:
                self._missed.clear()
            for h in hashes[:done]:
                if h not in out:
                    self._missed[h] = now
            if self._conn is not None:
                self._drain_locked()  # reachable (again): what waits goes first
        return out

    def store(self, hashes: Sequence[str], vectors: np.ndarray) -> int:
        """Write ``vectors`` (``(len(hashes), dim)``) under ``hashes`` for this model, ``ON
        CONFLICT DO NOTHING``; returns the rows sent (0 in read-only mode or on a fault)."""
        if self.effective_mode == "ro" or not len(hashes):
            return 0
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.shape != (len(hashes), self.dim):
            raise ValueError(f"vectors shape {vectors.shape} != ({len(hashes)}, {self.dim})")
        with self._lock:
            if not self._usable() or not self._drain_locked():
                self._keep_unsent(hashes, vectors)
                return 0
            if not self._insert(hashes, vectors):
                self._keep_unsent(hashes, vectors)
                return 0
            return len(hashes)

    def _insert(self, hashes: Sequence[str], vectors: np.ndarray) -> bool:
        """One ``INSERT ... ON CONFLICT DO NOTHING`` of the rows; False after a fault (recorded)
        or when the role may not write (read-only from then on). Under the lock, connected."""
        try:
            from pgvector import HalfVector, Vector
            from psycopg import sql

            wrap = HalfVector if (self.vector_type or "").startswith("halfvec") else Vector
            q = sql.SQL("INSERT INTO {} (model, text_hash, vec) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING").format(
                sql.Identifier(TABLE)
            )
            rows = [(self.fingerprint, bytes.fromhex(h), wrap(v)) for h, v in zip(hashes, vectors, strict=True)]
            with self._conn.cursor() as cur:
                cur.executemany(q, rows)
        except Exception as exc:
            if getattr(exc, "sqlstate", None) == "42501":  # insufficient_privilege
                self.write_denied = True
                log.warning(
                    "shared embedding cache %s: this role may not write (%s); read-only from now on",
                    self.url,
                    _first_line(exc),
                )
                return False
            self._fault(exc)
            return False
        self.written += len(rows)
        for h in hashes:
            self._missed.pop(h, None)
        return True

    def _keep_unsent(self, hashes: Sequence[str], vectors: np.ndarray) -> None:
        """Journal what could not be written (read-write mode only). Under the lock."""
        if self.unsent is None or self.effective_mode == "ro":
            return
        try:
            self.unsent.add(hashes, vectors)
        except OSError as exc:
            log.warning("shared cache: cannot keep %d unsent vectors in %s: %s", len(hashes), self.unsent.path, exc)

    def _drain_locked(self) -> bool:
        """Send the unsent journal, :data:`DRAIN_BATCH` rows a statement; True when nothing is
        left (or there is no journal). What a fault leaves unsent stays in the journal. Under
        the lock, connected."""
        if self.unsent is None or not len(self.unsent) or self.effective_mode == "ro":
            return True
        items = self.unsent.items()
        keys = list(items)
        sent = 0
        for i in range(0, len(keys), DRAIN_BATCH):
            part = keys[i : i + DRAIN_BATCH]
            if not self._insert(part, np.stack([items[k] for k in part])):
                break
            sent += len(part)
        try:
            self.unsent.keep({k: items[k] for k in keys[sent:]})
        except OSError as exc:
            log.warning("shared cache: cannot rewrite the unsent journal %s: %s", self.unsent.path, exc)
        if sent:
            log.info(
                "shared embedding cache %s: %d vectors embedded while it could not take them written back (%d left)",
                self.url,
                sent,
                len(keys) - sent,
            )
        return sent == len(keys)

    def drain(self) -> int:
        """Send the unsent journal now if the server is usable (connecting when the back-off
        allows): at start, and from the daemon's idle dense thread. Returns the vectors
        still unsent."""
        with self._lock:
            if self.unsent is None or not len(self.unsent) or self.effective_mode == "ro":
                return len(self.unsent or ())
            if self._usable():
                self._drain_locked()
            return len(self.unsent)

    @property
    def unsent_count(self) -> int:
        """Vectors embedded here and not yet written to the shared cache."""
        return len(self.unsent) if self.unsent is not None else 0

    def fill_local(self, cache, hashes: Sequence[str]) -> int:
        """Copy the shared vectors of those ``hashes`` that ``cache`` (a
        :class:`daemon.index.embed_cache.EmbeddingCache` of the same model) lacks into it; returns how
        many were found. The bulk step before a first dense index."""
        want = [h for h in dict.fromkeys(hashes) if h not in cache]
        found = self.lookup(want)
        if found:
            keys = list(found)
            cache.put_many(keys, np.stack([found[k] for k in keys]))
        return len(found)

    def status(self) -> SharedCacheStatus:
        """The state for ``status`` / MCP ``index_status`` (no credentials)."""
        retry = None
        if self.state in ("down", "incompatible"):
            retry = round(max(0.0, self._next_try - time.monotonic()), 1)
        return SharedCacheStatus(
            url=self.url,
            mode=self.effective_mode,
            state=self.state,
            reachable=self.state == "ok",
            hits=self.hits,
            misses=self.misses,
            written=self.written,
            unreached=self.unreached,
            unsent=self.unsent_count,
            last_error=self.last_error,
            last_error_at=self.last_error_at,
            retry_in_s=retry,
            server=self.server,
            vector_type=self.vector_type,
        )

    def close(self) -> None:
        """Close the connection (a later call reconnects)."""
        with self._lock:
            if self._conn is not None:
                try:
                    self._conn.close()
                except Exception:
                    pass
                self._conn = None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def _check_parses(dsn: str) -> None:
    """``ValueError`` when libpq cannot parse ``dsn`` (an unencoded space in a URL, a
    ``key=value`` pair without its ``=``): a usage error, never retried. The message names
    the fault without the DSN (libpq's own may quote the password). No check without psycopg
    (the cache then reports the missing package)."""
    try:
        from psycopg import ProgrammingError
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        return
    try:
        conninfo_to_dict(dsn)
    except ProgrammingError as exc:
        text = str(exc)
        if "spaces" in text:
            why = "it has unencoded spaces (in a postgresql:// URL write a space as %20)"
        elif 'missing "="' in text:
            why = "a key=value pair has no '=' (quote a value with spaces: password='a b')"
        else:
            why = _scrub(_first_line(exc), dsn).split('"')[0].strip() or "libpq rejects it"
        raise ValueError(f"the shared cache DSN cannot be parsed: {why}") from None


def for_embedder(
    dsn: str | None, embedder, mode: str = "rw", *, index_dir: str | Path | None = None, **kw
) -> SharedCache | None:
    """A :class:`SharedCache` for ``embedder``'s model, or None when ``dsn`` is empty or
    there is no embedder. ``index_dir``: where its unsent journal lives (:func:`unsent_path`);
    None for none. ``ValueError`` for a bad ``mode`` or DSN."""
    if not dsn or embedder is None:
        return None
    if index_dir is not None:
        kw.setdefault("unsent", unsent_path(index_dir, embedder.fingerprint))
    return SharedCache(dsn, fingerprint=embedder.fingerprint, dim=embedder.dim, mode=mode, **kw)


def prefetch(engine, ids: Sequence[str]) -> int:
    """Before a dense batch of ``engine`` (a :class:`daemon.engine.Engine`): copy the shared
    vectors of the chunks ``ids`` whose embedded text is not in the engine's local
    embedding cache into it, in :data:`LOOKUP_BATCH` lookups; the following
    :meth:`~daemon.engine.Engine.embed_ids` then finds them locally and embeds only the
    misses. Returns the vectors found; 0 without ``engine.shared_cache``. The texts are
    read under the engine lock, the lookups run outside it."""
    shared = getattr(engine, "shared_cache", None)
    if shared is None or engine.embedder is None or not ids:
        return 0
    if engine.cache is None:
        engine.load_dense()
    _, hashes = engine.text_hashes(list(ids))  # the hashes dense_pending just made, if still valid
    t0 = time.perf_counter()
    n = shared.fill_local(engine.cache, [h for _, h in hashes])
    if n:
        log.info(
            "shared embedding cache: %d of %d pending vectors found in %.1f s", n, len(hashes), time.perf_counter() - t0
        )
    return n
