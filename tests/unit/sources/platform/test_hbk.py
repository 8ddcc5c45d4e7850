"""The v8 container and help-book reader on containers built to the published description,
and on broken ones: each bad case is a named error or a named skip, within a deadline."""

from __future__ import annotations

import random
import struct
import zipfile

import pytest

import hbk_fixtures as hf
from daemon.sources.platform.book import read_book
from daemon.sources.platform.hbk import BLOCK_HEADER, HbkError, HelpBook, Limits, V8Container


def _book_bytes(pages: dict[str, bytes] | None = None, **kw) -> bytes:
    b = hf.BookBuilder()
    gc = b.add(0, {"ru": "Глобальный контекст"}, "/objects/Global context.html", b"<html></html>")
    for i, (path, page) in enumerate((pages or {}).items()):
        b.add(gc, {"ru": f"p{i}"}, path, page)
    return b.build(**kw)


# ------------------------------------------------------------------------------ the container
def test_container_reads_entries_and_chained_bodies():
    body = bytes(range(256)) * 40  # 10,240 bytes over 10 blocks of 1,024
    data, layout = hf.container_bytes([("Первая", b"abc"), ("Вторая", body), ("Пустая", b"")], chunk={"Вторая": 1024})
    assert len(layout.chains["Вторая"]) == 10
    c = V8Container(data, "x.hbk")
    assert list(c.entries) == ["Первая", "Вторая", "Пустая"]
    assert c.read("Первая") == b"abc"
    assert c.read("Вторая") == body
    assert c.read("Пустая") == b""
    assert c.skips == []


def test_container_accepts_both_end_of_chain_markers():
    for end in (0x7FFFFFFF, 0xFFFFFFFF):
        data, _ = hf.container_bytes([("A", b"x" * 3000)], chunk={"A": 512}, end=end)
        assert V8Container(data, "x.hbk").read("A") == b"x" * 3000


def test_container_missing_entry_names_what_is_there():
    data, _ = hf.container_bytes([("Book", b"{}")])
    with pytest.raises(HbkError) as err:
        V8Container(data, "x.hbk").read("PackBlock")
    assert err.value.reason == "missing_entry" and "Book" in str(err.value) and "x.hbk" in str(err.value)


@pytest.mark.parametrize("cut", [0, 10, 16, 30, 47, 100, -1])
def test_truncated_container_is_a_named_error(tmp_path, deadline, cut):
    data = _book_bytes({"/objects/Global context/methods/a.html": b"<html></html>"})
    path = tmp_path / "shcntx_ru.hbk"
    path.write_bytes(data[:cut] if cut >= 0 else data[: len(data) // 2])
    with deadline(5):
        res = read_book(path)
    assert res.error and res.entries == []
    assert res.skips and res.skips[0].path == "shcntx_ru.hbk"
    assert res.skips[0].reason in (
        "hbk_truncated",
        "hbk_out_of_bounds",
        "hbk_bad_block",
        "hbk_missing_entry",
        "hbk_not_zip",
    )


def test_block_chain_that_loops_is_a_named_error(deadline):
    data, layout = hf.container_bytes([("A", b"y" * 4096)], chunk={"A": 512})
    chain = layout.chains["A"]
    raw = bytearray(data)
    last = chain[-1]
    raw[last + 20 : last + 28] = b"%08x" % chain[1]  # the last block points back to the second ...
    assert 4096 + 256 < len(raw)
    raw[chain[0] + 2 : chain[0] + 10] = b"%08x" % (4096 + 256)  # ... and the document claims more than the chain gave
    c = V8Container(bytes(raw), "loop.hbk")
    with deadline(5), pytest.raises(HbkError) as err:
        c.read("A")
    assert err.value.reason == "chain_loop" and "loop.hbk" in str(err.value) and "'A'" in str(err.value)


def test_self_loop_of_empty_blocks_ends(deadline):
    """A block of size 0 pointing at itself would never make progress: caught as a loop."""
    data, layout = hf.container_bytes([("A", b"z" * 100)], chunk={"A": 50})
    raw = bytearray(data)
    second = layout.chains["A"][1]
    raw[second + 11 : second + 19] = b"00000000"  # block size 0 ...
    raw[second + 20 : second + 28] = b"%08x" % second  # ... pointing at itself
    with deadline(5), pytest.raises(HbkError) as err:
        V8Container(bytes(raw), "x.hbk").read("A")
    assert err.value.reason == "chain_loop"


def test_sizes_past_the_end_are_named_errors():
    data, layout = hf.container_bytes([("A", b"q" * 600)])
    head = layout.chains["A"][0]
    raw = bytearray(data)
    raw[head + 2 : head + 10] = b"7ffffff0"  # the payload claims 2 GB
    with pytest.raises(HbkError) as err:
        V8Container(bytes(raw), "big.hbk").read("A")
    assert err.value.reason == "out_of_bounds" and "declares" in str(err.value)
    raw = bytearray(data)
    raw[head + 20 : head + 28] = b"%08x" % (len(data) + 10_000)  # next block past the end
    raw[head + 2 : head + 10] = b"%08x" % 700  # longer than the first block, so the chain is followed
    with pytest.raises(HbkError) as err:
        V8Container(bytes(raw), "x.hbk").read("A")
    assert err.value.reason == "out_of_bounds" and "past the end" in str(err.value)


def test_document_limit_is_enforced():
    data, _ = hf.container_bytes([("A", b"w" * 5000)])
    with pytest.raises(HbkError) as err:
        V8Container(data, "x.hbk", Limits(max_document=4096)).read("A")
    assert err.value.reason == "too_large"


def test_entry_name_that_is_not_utf16_is_a_named_skip():
    bad = "Плохое".encode("utf-16-le")[:4] + b"\x00\xd8" + b"A\x00"  # a lone high surrogate
    data, _ = hf.container_bytes([("Book", b"{}"), (bad, b"?"), ("PackBlock", b"pk")])
    c = V8Container(data, "names.hbk")
    assert list(c.entries) == ["Book", "PackBlock"]
    assert len(c.skips) == 1
    skip = c.skips[0]
    assert skip.path == "names.hbk" and skip.reason == "hbk_bad_name" and "entry #1" in skip.detail


def test_too_many_entries_is_refused():
    data, _ = hf.container_bytes([(f"e{i}", b"") for i in range(20)])
    with pytest.raises(HbkError) as err:
        V8Container(data, "x.hbk", Limits(max_entries=10))
    assert err.value.reason == "too_many_entries"


def test_not_a_container(tmp_path):
    path = tmp_path / "shcntx_ru.hbk"
    path.write_bytes(b"PK\x03\x04" + b"\x00" * 200)
    res = read_book(path)
    assert res.skips[0].reason == "hbk_bad_block" and "byte 16" in res.error
    empty = tmp_path / "empty.hbk"
    empty.write_bytes(b"")
    res = read_book(empty)
    assert res.skips[0].reason == "hbk_truncated" and "empty" in res.error


# ------------------------------------------------------------------------------ the ZIP parts
def _zip_bomb(name: str, inflated: int) -> bytes:
    return hf.zip_bytes([(name, b"\x00" * inflated)])


def test_zip_bomb_page_is_a_named_skip(tmp_path, deadline):
    page = b"<html><body><p class='V8SH_heading'>Ok (Ok)</p></body></html>"
    b = hf.BookBuilder()
    gc = b.add(0, {"ru": "Глобальный контекст"}, "/objects/Global context.html", b"<html></html>")
    b.add(gc, {"ru": "Ok"}, "/objects/Global context/methods/ok.html", page)
    b.add(gc, {"ru": "Bomb"}, "/objects/Global context/methods/bomb.html", b"\x00" * (64 << 20))
    path = tmp_path / "shcntx_ru.hbk"
    path.write_bytes(b.build())
    assert path.stat().st_size < 1 << 20  # 64 MB of zeros deflate to a small file
    with deadline(10):
        res = read_book(path, Limits(max_page=1 << 20))
    assert [e.name for e in res.entries] == ["Ok"]
    bomb = [s for s in res.skips if s.reason == "zip_bomb"]
    assert bomb and bomb[0].path == "shcntx_ru.hbk:objects/Global context/methods/bomb.html"
    assert "limit 1048576" in bomb[0].detail


def test_member_that_lies_about_its_size_is_a_named_skip(tmp_path):
    """A member whose headers declare fewer bytes than it inflates to: read up to the declared
    size, then the CRC fails; never more than the cap."""
    raw = bytearray(hf.zip_bytes([("objects/x/methods/a.html", b"A" * 100_000)]))
    for sig, off in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):  # uncompressed size in both headers
        at = raw.find(sig)
        raw[at + off : at + off + 4] = struct.pack("<I", 1000)
    b = hf.BookBuilder()
    b.add(0, {"ru": "Тип"}, "/objects/x.html", b"<html></html>")
    entries = b.entries()
    entries[1] = ("FileStorage", bytes(raw))
    data, _ = hf.container_bytes(entries)
    book = HelpBook(V8Container(data, "x.hbk"))
    assert book.page("objects/x/methods/a.html") is None
    assert book.skips[-1].reason == "bad_zip_member" and "a.html" in book.skips[-1].detail


def test_total_inflated_cap(tmp_path):
    b = hf.BookBuilder()
    for i in range(5):
        b.add(0, {"ru": f"T{i}"}, f"/objects/t{i}.html", b"<html>" + b" " * 10_000 + b"</html>")
    data, _ = hf.container_bytes(b.entries())
    book = HelpBook(V8Container(data, "x.hbk", Limits(max_inflated=25_000)))
    got = [book.page(f"/objects/t{i}.html") for i in range(5)]
    assert sum(g is not None for g in got) == 2
    assert [s.reason for s in book.skips] == ["zip_bomb"] * 3


def test_table_of_contents_bomb_is_a_named_error():
    b = hf.BookBuilder()
    entries = b.entries()
    entries[5] = ("PackBlock", _zip_bomb("PackBlock", 8 << 20))
    data, _ = hf.container_bytes(entries)
    with pytest.raises(HbkError) as err:
        HelpBook(V8Container(data, "x.hbk", Limits(max_toc=1 << 20)))
    assert err.value.reason == "zip_bomb" and "table of contents" in str(err.value)


def test_file_storage_that_is_not_a_zip():
    b = hf.BookBuilder()
    entries = b.entries()
    entries[1] = ("FileStorage", b"not a zip at all")
    data, _ = hf.container_bytes(entries)
    with pytest.raises(HbkError) as err:
        HelpBook(V8Container(data, "x.hbk"))
    assert err.value.reason == "not_zip" and "FileStorage" in str(err.value)


def test_stored_members_read_too():
    b = hf.BookBuilder()
    b.add(0, {"ru": "T"}, "/objects/t.html", b"<html>stored</html>")
    entries = b.entries()
    entries[1] = ("FileStorage", hf.zip_bytes(list(b.pages.items()), compression=zipfile.ZIP_STORED))
    book = HelpBook(V8Container(hf.container_bytes(entries)[0], "x.hbk"))
    assert book.page("/objects/t.html") == b"<html>stored</html>"


# ------------------------------------------------------------------------------ no crash, no hang
def test_random_damage_never_crashes_or_hangs(tmp_path, deadline, sample_entries):
    """Flip bytes and cut the file at random places: every read ends in time with entries, a
    named error or named skips; nothing else is raised."""
    builder, _ = hf.book_from_entries(sample_entries[:150])
    data = builder.build(chunk={"FileStorage": 4096, "PackBlock": 512})
    rng = random.Random(25)
    path = tmp_path / "shcntx_ru.hbk"
    outcomes = set()
    with deadline(60):
        for trial in range(60):
            raw = bytearray(data)
            if trial % 3 == 0:
                raw = raw[: rng.randrange(len(raw))]
            for _ in range(rng.randrange(1, 8)):
                at = rng.randrange(len(raw))
                raw[at] = rng.randrange(256)
            if trial % 5 == 0:  # hit a block header's hex digits
                at = rng.choice([i for i in range(16, min(len(raw), 4000)) if raw[i : i + 2] == b"\r\n"] or [16])
                raw[at + 2 : at + 10] = b"%08x" % rng.randrange(1 << 31)
            path.write_bytes(bytes(raw))
            res = read_book(path)
            assert res.error or res.entries or res.skips
            for s in res.skips:
                assert s.path.startswith("shcntx_ru.hbk") and s.reason and s.detail
            outcomes.add("error" if res.error else "read")
    assert outcomes == {"error", "read"}


def test_block_header_size_matches_the_description():
    assert len(hf.block_header(1, 2, 3)) == BLOCK_HEADER == 31


def test_file_larger_than_the_limit_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "shcntx_ru.hbk"
    path.write_bytes(_book_bytes())
    res = read_book(path, Limits(max_document=1000))
    assert res.skips[0].reason == "hbk_too_large" and "limit 1000" in res.error


def test_an_entry_name_too_long_is_a_named_skip():
    data, _ = hf.container_bytes([("Book", b"{}"), ("Я" * 5000, b"?")])
    c = V8Container(data, "x.hbk")
    assert list(c.entries) == ["Book"]
    assert c.skips[0].reason == "hbk_bad_name" and "entry #1: a name of" in c.skips[0].detail
