"""Metadata chunker tests (daemon/sources/metadata.py) on descriptors written in tmp_path."""

from __future__ import annotations

from daemon.sources.files import SourceFile
from daemon.sources.metadata import chunk_metadata, chunk_metadata_bytes, missing_objects

_MD = "http://v8.1c.ru/8.3/MDClasses"

_EDT = "http://g5.1c.ru/v8/dt/metadata/mdclass"


def test_valid_xml_that_is_not_a_1c_object_is_not_metadata(tmp_path):
    rel = "Catalogs/Валюты.xml"
    source = SourceFile(path=rel, size=1, mtime_ns=1, owner="Справочник.Валюты", object_type="Справочник")
    props = "<Properties><Name>Валюты</Name></Properties>"
    cases = {
        "foreign root": b"<foo><bar/></foo>",
        "no namespace": f"<MetaDataObject><Catalog>{props}</Catalog></MetaDataObject>".encode(),
        "other namespace": f'<MetaDataObject xmlns="urn:x"><Catalog>{props}</Catalog></MetaDataObject>'.encode(),
        "foreign object element": f'<MetaDataObject xmlns="{_MD}"><foo>{props}</foo></MetaDataObject>'.encode(),
        "another type": f'<MetaDataObject xmlns="{_MD}"><Document>{props}</Document></MetaDataObject>'.encode(),
        "empty": f'<MetaDataObject xmlns="{_MD}"/>'.encode(),
        "EDT element of another namespace": b'<m:Catalog xmlns:m="urn:x"><name>X</name></m:Catalog>',
        "EDT element without namespace": b"<Catalog><name>X</name></Catalog>",
        "EDT element of another type": (
            f'<mdclass:Document xmlns:mdclass="{_EDT}"><name>X</name></mdclass:Document>'.encode()
        ),
        "EDT non-object element": f'<mdclass:Foo xmlns:mdclass="{_EDT}"><name>X</name></mdclass:Foo>'.encode(),
    }
    for case, data in cases.items():
        chunks, skips = chunk_metadata_bytes(data, source, "designer")
        assert chunks == [], case
        assert [(s.path, s.reason) for s in skips] == [(rel, "not_metadata")], case
        assert skips[0].detail, case
    # the same through chunk_metadata (the tester's case), in both formats
    (tmp_path / "Catalogs").mkdir()
    (tmp_path / rel).write_bytes(b"<foo><bar/></foo>")
    chunks, skips = chunk_metadata(tmp_path, source, "designer")
    assert chunks == [] and [(s.path, s.reason) for s in skips] == [(rel, "not_metadata")]
    mdo = SourceFile(
        path="src/Catalogs/Валюты/Валюты.mdo", size=1, mtime_ns=1, owner="Справочник.Валюты", object_type="Справочник"
    )
    chunks, skips = chunk_metadata_bytes(b"<foo><bar/></foo>", mdo, "edt")
    assert chunks == [] and [s.reason for s in skips] == ["not_metadata"]
    # genuine minimal objects still chunk, in both formats; without a known type any 1C class is accepted
    good = f'<MetaDataObject xmlns="{_MD}"><Catalog>{props}</Catalog></MetaDataObject>'.encode()
    chunks, skips = chunk_metadata_bytes(good, source, "designer")
    assert skips == [] and chunks[0].owner == "Справочник.Валюты"
    edt = f'<mdclass:Catalog xmlns:mdclass="{_EDT}"><name>Валюты</name></mdclass:Catalog>'.encode()
    chunks, skips = chunk_metadata_bytes(edt, mdo, "edt")
    assert skips == [] and chunks[0].owner == "Справочник.Валюты"
    bare = SourceFile(path="Catalogs/Валюты.xml", size=1, mtime_ns=1)
    chunks, skips = chunk_metadata_bytes(good, bare, "designer")
    assert skips == [] and chunks[0].object_type == "Справочник"
    chunks, skips = chunk_metadata_bytes(b"<foo/>", bare, "designer")
    assert chunks == [] and [s.reason for s in skips] == ["not_metadata"]


def test_missing_objects_finds_nfd_named_objects_and_edt_projects(tmp_path):
    import unicodedata

    nfd = unicodedata.normalize("NFD", "Йогурт")
    proj = tmp_path / nfd / "src"
    (proj / "Configuration").mkdir(parents=True)
    (proj / "Configuration/Configuration.mdo").write_text(
        f'<mdclass:Configuration xmlns:mdclass="{_EDT}"><name>К</name><catalogs>Catalog.Йогурт</catalogs>'
        "<catalogs>Catalog.Нет</catalogs></mdclass:Configuration>",
        encoding="utf-8",
    )
    (proj / "Catalogs" / nfd).mkdir(parents=True)
    (proj / "Catalogs" / nfd / f"{nfd}.mdo").write_text(
        f'<mdclass:Catalog xmlns:mdclass="{_EDT}"><name>Йогурт</name></mdclass:Catalog>', encoding="utf-8"
    )
    notes = missing_objects(tmp_path)
    assert [(s.path, s.reason) for s in notes] == [("Йогурт/src/Catalogs/Нет/Нет.mdo", "missing_on_disk")]
    # Designer: Configuration.xml names the objects in NFC, the dump wrote NFD names
    designer = tmp_path / "designer"
    (designer / "CommonModules" / nfd).mkdir(parents=True)
    (designer / "Configuration.xml").write_text(
        f'<MetaDataObject xmlns="{_MD}"><Configuration><Properties><Name>К</Name></Properties><ChildObjects>'
        "<Catalog>Йогурт</Catalog><CommonModule>Йогурт</CommonModule><Catalog>Нет</Catalog>"
        "</ChildObjects></Configuration></MetaDataObject>",
        encoding="utf-8",
    )
    (designer / "Catalogs").mkdir()
    (designer / "Catalogs" / f"{nfd}.xml").write_bytes(b"<x/>")
    (designer / "CommonModules" / f"{nfd}.xml").write_bytes(b"<x/>")
    assert [s.path for s in missing_objects(designer)] == ["Catalogs/Нет.xml"]
