"""The engine's lookups behind its lock (issue 11, item 4): what the service's get_method,
describe_object, read_module and document_symbols read, on the bundled sample export."""

from __future__ import annotations

import os

import pytest

from daemon.engine import Engine

DOC = "Documents/РеализацияТоваров.xml"
OBJECT_MODULE = "Documents/РеализацияТоваров/Ext/ObjectModule.bsl"


@pytest.fixture
def eng(sample_root, tmp_path):
    e = Engine.open(sample_root, index_dir=tmp_path / "idx", embedder=None)
    e.refresh()
    return e


def test_file_chunks_of_a_module_and_of_a_descriptor(eng):
    code = eng.file_chunks(OBJECT_MODULE, kind="bsl")
    assert code and all(c.path == OBJECT_MODULE and c.is_code for c in code)
    assert eng.file_chunks(DOC, kind="bsl") is None  # a descriptor is not a module
    meta = eng.file_chunks(DOC)
    assert meta and meta[0].kind == "object" and meta[0].owner == "Документ.РеализацияТоваров"
    assert eng.file_chunks("Documents/Нет.xml") is None
    assert eng.is_indexed(DOC) and not eng.is_indexed("Documents/Нет.xml")


def test_metadata_object_reads_fields_and_modules_in_one_batch(eng):
    o, fields, modules, also_in = eng.metadata_object("Документ", "реализациятоваров")  # case-insensitive
    assert o.owner == "Документ.РеализацияТоваров" and also_in == []
    assert fields and all(f.path == DOC and f.kind != "object" for f in fields)
    assert modules[OBJECT_MODULE] == "object"
    assert all(p.startswith("Documents/РеализацияТоваров/") for p in modules)
    with pytest.raises(LookupError, match="similar: Документ.РеализацияТоваров"):
        eng.metadata_object("Документ", "Реализация")


def test_confine_is_the_one_path_rule(eng, sample_root, tmp_path):
    assert eng.confine(OBJECT_MODULE) == OBJECT_MODULE
    assert eng.confine(str(sample_root / OBJECT_MODULE)) == OBJECT_MODULE  # absolute inside the root
    assert eng.confine("./Documents//РеализацияТоваров.xml") == DOC
    for bad, why in [("", "empty"), ("../x.bsl", r"'\.\.'"), (str(tmp_path / "elsewhere.bsl"), "outside")]:
        with pytest.raises(ValueError, match=why):
            eng.confine(bad)
    os.symlink(tmp_path, sample_root / "out")
    with pytest.raises(ValueError, match="symlink"):
        eng.confine("out/x.bsl")


def test_unsaved_flags_follow_the_snapshot(eng):
    assert eng.lexical_unsaved  # refreshed, not saved
    eng.save()
    assert not eng.lexical_unsaved and not eng.dense_unsaved
    assert eng.skipped_files() == eng.skipped and eng.skipped_files() is not eng.skipped


def test_similar_objects_is_the_did_you_mean_of_describe_object(eng):
    assert eng.similar_objects("Справочник.Контрагент")[0] == "Справочник.Контрагенты"  # a typo in the ending
    assert "Справочник.Контрагенты" in eng.similar_objects("Документ.Контрагенты")  # the right name, the wrong type
    assert "Справочник.Контрагенты" in eng.similar_objects("Контрагенты")  # no type at all
    assert eng.similar_objects("Справочник.Щщщщщщщщ") == []


def test_describe_object_takes_english_names_and_always_suggests(eng):
    """``Catalog.Users`` on a Russian configuration (the README's example): the type is mapped,
    the name translated through the lexicon; a typo or an unknown name gets the closest
    objects, never a bare "not found"."""
    from daemon.service.lookups import Lookups

    look = Lookups(eng, max_file_bytes=8 << 20)
    assert look.describe_object("Catalog.Currencies").owner == "Справочник.Валюты"
    assert look.describe_object("InformationRegister.CurrencyRates").owner == "РегистрСведений.КурсыВалют"
    assert look.describe_object("Catalogs.currencies").owner == "Справочник.Валюты"  # folder name, any case
    assert look.describe_object("Catalog.Currency").owner == "Справочник.Валюты"  # words compared by stem
    with pytest.raises(LookupError, match="closest objects by name: Справочник.Валюты"):
        look.describe_object("Catalog.Currenciez")  # a typo, read shortened: a guess, suggested, not taken
    # every word met: the one object with the fewest other words is meant
    assert look.describe_object("InformationRegister.Rates").owner == "РегистрСведений.КурсыВалют"
    with pytest.raises(LookupError, match="closest objects by name: РегистрСведений.КурсыВалют"):
        look.describe_object("InformationRegister.CurrencyPrices")  # one word of two met: a suggestion
    with pytest.raises(LookupError, match=r"the index has 1 of that type, e.g. Документ.РеализацияТоваров"):
        look.describe_object("Document.Foo")
    with pytest.raises(LookupError, match="nearest in spelling of the 3 of that type: "):
        look.describe_object("Справочник.Щщщщщщщщ")
    with pytest.raises(LookupError, match="the index has no metadata object of type Бот"):
        look.describe_object("Bot.Foo")
