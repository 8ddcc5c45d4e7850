"""Which platform help answers (``daemon/service/platform.py``): installed versions found in an
install tree of built help books, the configuration's compatibility mode, ``--platform-version``,
the bundled data set while a version is indexed or when its books are broken; indexes built once
and loaded warm; the names a request may give."""

from __future__ import annotations

import os

import msgspec
import pytest

import hbk_fixtures as hf
from daemon.service.platform import BUNDLED, PlatformHelp

#: The Designer descriptor's part that carries the mode.
CONFIG = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<MetaDataObject><Configuration><Properties>'
    "<Name>Тест</Name><CompatibilityMode>{mode}</CompatibilityMode></Properties></Configuration></MetaDataObject>"
)


def export_with_mode(root, mode: str):
    root.mkdir(parents=True, exist_ok=True)
    (root / "Configuration.xml").write_text(CONFIG.format(mode=mode), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def install(tmp_path_factory, sample_entries):
    """An install tree of two versions: 8.3.24.1467 (Russian and English language reference,
    and the language book) and 8.3.10.2000 (its Russian reference of a third of the entries)."""
    base = tmp_path_factory.mktemp("1cv8")
    new = base / "8.3.24.1467" / "bin"
    new.mkdir(parents=True)
    ru, _ = hf.book_from_entries(sample_entries)
    english = [msgspec.structs.replace(e, description=f"EN: {e.description}") for e in sample_entries]
    en, _ = hf.book_from_entries(english, lang="en")
    (new / "shcntx_ru.hbk").write_bytes(ru.build())
    (new / "shcntx_en.hbk").write_bytes(en.build())
    lang, _ = hf.language_book(
        [
            hf.Entry(kind="type", name="Строка", name_en="String", description="Строковый тип."),
            hf.Entry(kind="keyword", name="Если", name_en="If", description="Условный оператор."),
        ]
    )
    (new / "shlang_ru.hbk").write_bytes(lang.build())
    old = base / "8.3.10.2000" / "bin"
    old.mkdir(parents=True)
    small, _ = hf.book_from_entries(sample_entries[: len(sample_entries) // 3])
    (old / "shcntx_ru.hbk").write_bytes(small.build())
    return base


def help_for(root, install, cache, **kw) -> PlatformHelp:
    return PlatformHelp(root, help_paths=[install], standard_roots=[], cache_dir=cache, **kw)


def test_the_compatibility_mode_picks_the_nearest_installed_version(tmp_path, install):
    ph = help_for(export_with_mode(tmp_path / "e", "Version8_3_24"), install, tmp_path / "c")
    assert ph.chosen == "8.3.24.1467" and "CompatibilityMode Version8_3_24" in ph.why
    assert list(ph.sources) == [BUNDLED, "8.3.10.2000", "8.3.24.1467"]
    old = help_for(export_with_mode(tmp_path / "o", "Version8_3_5"), install, tmp_path / "c")
    assert old.chosen == "8.3.10.2000"  # the lowest installed at or above 8.3.5
    none = help_for(export_with_mode(tmp_path / "n", "DontUse"), install, tmp_path / "c")
    assert none.chosen == "8.3.24.1467" and none.why == "CompatibilityMode DontUse: the newest installed version"


def test_platform_version_overrides_and_names_what_is_missing(tmp_path, install):
    root = export_with_mode(tmp_path / "e", "Version8_3_24")
    assert help_for(root, install, tmp_path / "c", version="8.3.10").chosen == "8.3.10.2000"
    assert help_for(root, install, tmp_path / "c", version="bundled").chosen == BUNDLED
    missing = help_for(root, install, tmp_path / "c", version="8.3.99")
    assert missing.chosen == "8.3.24.1467" and "8.3.99 is not installed" in missing.why
    with pytest.raises(ValueError, match="one of: bundled, 8.3.10.2000, 8.3.24.1467"):
        missing.source_for("8.2")


def test_without_an_installed_platform_the_bundled_data_set_answers(tmp_path):
    ph = PlatformHelp(export_with_mode(tmp_path / "e", "Version8_3_24"), standard_roots=[], cache_dir=tmp_path / "c")
    assert ph.chosen == BUNDLED and "no installed" in ph.why
    ans = ph.help("СтрНайти")
    assert ans.exact and ans.platform.source == "bundled" and ans.platform.version == ""
    assert ans.entries[0].signatures[0].params[0].name == "Строка"
    assert ans.hits[0].kind == "platform_function" and ans.hits[0].path == "platform/bundled/bslGlobals.json"


def test_an_installed_version_answers_once_built_the_bundled_data_set_meanwhile(tmp_path, install):
    ph = help_for(export_with_mode(tmp_path / "e", "Version8_3_24"), install, tmp_path / "c")
    src, used = ph.answering()  # not built yet: its build starts, the bundled data set answers
    assert src.name == BUNDLED and used.state == "indexing" and "being indexed" in used.why
    assert ph.sources["8.3.24.1467"].done.wait(120)
    src, used = ph.answering()
    assert src.name == "8.3.24.1467" and used.version == "8.3.24.1467" and used.state == "ready"
    ans = ph.help("ТаблицаЗначений.Свернуть")
    assert ans.exact and ans.platform.label == "1C:Enterprise 8.3.24.1467"
    e = ans.entries[0]
    assert e.since and e.availability and e.description_en.startswith("EN: ")  # the English book merged
    assert ans.hits[0].path == "platform/8.3.24.1467/shcntx_ru.hbk"
    assert ph.help("Если").entries[0].kind == "keyword"  # the language book
    st = ph.status()
    by = {s.version or "bundled": s for s in st.sources}
    assert by["8.3.24.1467"].chosen and by["8.3.24.1467"].state == "ready" and by["8.3.24.1467"].entries
    assert by["8.3.10.2000"].state == "available" and st.used.version == "8.3.24.1467"
    assert st.compatibility_mode == "Version8_3_24"


def test_built_once_then_loaded_and_rebuilt_when_a_book_changes(tmp_path, install, sample_entries):
    import shutil

    tree = tmp_path / "1cv8"
    shutil.copytree(install / "8.3.10.2000", tree / "8.3.10.2000")
    root = export_with_mode(tmp_path / "e", "Version8_3_10")
    first = help_for(root, tree, tmp_path / "c")
    src = first.ensure(first.sources["8.3.10.2000"])
    assert src.state == "ready" and not src.index.loaded_from_disk
    again = help_for(root, tree, tmp_path / "c")
    src2 = again.ensure(again.sources["8.3.10.2000"])
    assert src2.index.loaded_from_disk and src2.index.meta.key == src.index.meta.key
    book, _ = hf.book_from_entries(sample_entries[:50])
    (tree / "8.3.10.2000" / "bin" / "shcntx_ru.hbk").write_bytes(book.build())
    old_folder = src.index.folder
    os.utime(old_folder / "meta.json", (0, 0))  # unused for long
    changed = help_for(root, tree, tmp_path / "c")
    src3 = changed.ensure(changed.sources["8.3.10.2000"])
    assert not src3.index.loaded_from_disk and src3.index.meta.key != src.index.meta.key
    assert not old_folder.exists() and src3.index.folder.exists()  # the stale index was removed


def test_a_broken_book_is_an_error_the_bundled_data_set_answers(tmp_path, install):
    tree = tmp_path / "1cv8" / "8.3.24.1467"
    tree.mkdir(parents=True)
    good = (install / "8.3.24.1467" / "bin" / "shcntx_ru.hbk").read_bytes()
    (tree / "shcntx_ru.hbk").write_bytes(good[: len(good) // 3])  # cut short
    ph = help_for(export_with_mode(tmp_path / "e", "Version8_3_24"), tmp_path / "1cv8", tmp_path / "c")
    src = ph.ensure(ph.sources["8.3.24.1467"])
    assert src.state == "error" and src.error
    ans = ph.help("СтрНайти")
    assert ans.platform.source == "bundled" and "could not be read" in ans.platform.why
    st = ph.status()
    assert st.used.state == "error" and next(s for s in st.sources if s.version).error


@pytest.mark.parametrize(
    ("query", "kind", "qualified"),
    [
        ("Новый ТаблицаЗначений", "constructor", "Новый ТаблицаЗначений"),
        ("New ValueTable", "constructor", "Новый ТаблицаЗначений"),
        ("ValueTable.GroupBy", "method", "ТаблицаЗначений.Свернуть"),
        ("ValueTable.Свернуть", "method", "ТаблицаЗначений.Свернуть"),
        ("КодировкаТекста.UTF8", "enum_value", "КодировкаТекста.UTF8"),
        ("СтрНайти()", "function", "СтрНайти"),
    ],
)
def test_the_names_a_request_may_give(tmp_path, query, kind, qualified):
    ph = PlatformHelp(tmp_path, standard_roots=[], cache_dir=tmp_path / "c")
    ans = ph.help(query, names_only=True)
    assert ans.exact and ans.entries[0].kind == kind and ans.entries[0].qualified == qualified


def test_a_question_is_ranked_and_names_only_gives_nothing(tmp_path):
    ph = PlatformHelp(tmp_path, standard_roots=[], cache_dir=tmp_path / "c")
    ans = ph.help("как найти подстроку в строке", mode="lexical", top_k=5)
    assert not ans.exact and len(ans.entries) == 5 and ans.total > 5
    assert [e.qualified for e in ans.entries] == [h.symbol for h in ans.hits]
    assert "СтрНайти" in [e.qualified for e in ans.entries]
    assert ph.help("как найти подстроку в строке", names_only=True).entries == []
    assert ph.help("ТаблицаЗначений", kind="constructor").entries[0].kind == "constructor"
    with pytest.raises(ValueError, match="unknown platform entry kind"):
        ph.help("x", kind="class")
