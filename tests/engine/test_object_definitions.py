"""An object several projects define: a small EDT export made in tmp_path with a configuration
project and an extension project that adopts the same catalog (as yaxunit-edt's
``fixtures/demo-configuration`` and ``tests`` do). ``describe_object`` answers from the
configuration's own definition whatever the order the files were indexed in, and names the
other definition; a snapshot load keeps that choice."""

from __future__ import annotations

from pathlib import Path

from daemon.engine import Engine
from daemon.service.lookups import Lookups

_MD = 'xmlns:mdclass="http://g5.1c.ru/v8/dt/metadata/mdclass"'
#: The extension sorts first by path, so an answer that went by path or by index order alone
#: would pick its adopted copy.
EXT, CONF = "a-ext", "z-conf"
OWN = f"{CONF}/src/Catalogs/Товары/Товары.mdo"
ADOPTED = f"{EXT}/src/Catalogs/Товары/Товары.mdo"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _attribute(name: str) -> str:
    return f"<attributes><name>{name}</name><type><types>String</types></type></attributes>"


def _export(root: Path) -> Path:
    """The configuration (its own Товары with two attributes) and the extension (the adopted
    copy, no attributes, and a catalog of its own)."""
    _write(
        root / CONF / "src/Configuration/Configuration.mdo",
        f"<mdclass:Configuration {_MD}><name>Демо</name><catalogs>Catalog.Товары</catalogs></mdclass:Configuration>",
    )
    _write(
        root / OWN,
        f"<mdclass:Catalog {_MD}><name>Товары</name>{_attribute('Артикул')}{_attribute('Поставщик')}</mdclass:Catalog>",
    )
    _write(
        root / EXT / "src/Configuration/Configuration.mdo",
        f"<mdclass:Configuration {_MD}><name>Тесты</name><namePrefix>Т_</namePrefix>"
        "<configurationExtensionPurpose>Customization</configurationExtensionPurpose>"
        "<catalogs>Catalog.Товары</catalogs></mdclass:Configuration>",
    )
    _write(
        root / ADOPTED,
        f"<mdclass:Catalog {_MD}><name>Товары</name><objectBelonging>Adopted</objectBelonging></mdclass:Catalog>",
    )
    return root


def _described(eng: Engine):
    return Lookups(eng, max_file_bytes=eng.config.max_file_bytes).describe_object("Справочник.Товары")


def test_the_own_definition_is_described_and_the_adopted_copy_named(tmp_path):
    root = _export(tmp_path / "export")
    eng = Engine.open(root, index_dir=tmp_path / "idx", embedder=None)
    eng.refresh()
    assert [p.is_extension for p in eng.state.info.projects] == [True, False]  # a-ext, z-conf

    d = _described(eng)
    assert (d.path, [f.name for f in d.attributes], d.also_in) == (OWN, ["Артикул", "Поставщик"], [ADOPTED])
    assert d.properties.get("ObjectBelonging") is None

    # an edit and a restore of the configuration's descriptor re-index it after the adopted copy
    own = root / OWN
    text = own.read_text(encoding="utf-8")
    own.write_text(text.replace("Поставщик", "Производитель"), encoding="utf-8")
    eng.update_paths([OWN])
    own.write_text(text, encoding="utf-8")
    eng.update_paths([OWN])
    d = _described(eng)
    assert (d.path, len(d.attributes), d.also_in) == (OWN, 2, [ADOPTED])
    eng.save()

    loaded = Engine.open(root, index_dir=tmp_path / "idx", embedder=None)  # the snapshot, no refresh
    assert (_described(loaded).path, _described(loaded).also_in) == (OWN, [ADOPTED])


def test_an_object_defined_once_names_no_other_definition(tmp_path):
    root = _export(tmp_path / "export")
    (root / ADOPTED).unlink()
    eng = Engine.open(root, index_dir=tmp_path / "idx", embedder=None)
    eng.refresh()
    d = _described(eng)
    assert (d.path, d.also_in) == (OWN, [])
