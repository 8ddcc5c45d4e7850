"""The words of metadata objects' names and synonyms (daemon.index.metanames.ObjectWords):
kept current chunk by chunk through the reconcile's hooks, equal to a build from scratch
after edits; and what a question names."""

from __future__ import annotations

from daemon.engine import Engine
from daemon.index.metanames import ObjectWords
from daemon.text.lexicon import name_words


def _scratch(store) -> tuple[dict, dict]:
    fresh = ObjectWords()
    fresh.build(store)
    return fresh.state()


def test_object_words_follow_edits_and_equal_a_build_from_scratch(sample_root, tmp_path):
    eng = Engine.open(sample_root, index_dir=tmp_path / "idx", embedder=None)
    eng.refresh()
    st = eng.state
    words = st.meta_names.ensure_objects(st.store)
    assert words.state() == _scratch(st.store)
    valuty = [o for _, o, _ in words.named(set(name_words("справочник валюты")), ("Справочник",))]
    assert valuty == ["Справочник.Валюты"]

    # a synonym changed, an object deleted, an object added (a copy under another name)
    cat = sample_root / "Catalogs" / "Валюты.xml"
    text = cat.read_text(encoding="utf-8-sig")
    cat.write_text(text.replace("<v8:content>Валюты</v8:content>", "<v8:content>Денежные единицы</v8:content>", 1))
    (sample_root / "Catalogs" / "Номенклатура.xml").unlink()
    (sample_root / "Catalogs" / "Банки.xml").write_text(
        text.replace("Валюты", "Банки").replace(
            "<v8:content>Банки</v8:content>", "<v8:content>Кредитные организации</v8:content>"
        ),
        encoding="utf-8",
    )
    eng.refresh()
    assert st.meta_names.objects is words  # kept, not rebuilt
    assert words.state() == _scratch(st.store)
    assert [o for _, o, _ in words.named(set(name_words("денежные единицы")), None)] == ["Справочник.Валюты"]
    assert [o for _, o, _ in words.named(set(name_words("кредитные организации")), None)] == ["Справочник.Банки"]
    assert not any(o == "Справочник.Номенклатура" for _, o, _ in words.named(set(name_words("номенклатура")), None))


def test_the_longest_named_object_wins_and_fields_are_named_by_their_words():
    from daemon.contract import Chunk
    from daemon.index.chunkstore import ChunkStore

    store = ChunkStore()
    for t, n, syn in (
        ("Справочник", "Валюты", "Валюты"),
        ("РегистрСведений", "КурсыВалют", "Курсы валют"),
        ("Справочник", "Пользователи", "Пользователи"),
    ):
        store.add(
            Chunk(
                id=f"{t}/{n}.xml::",
                path=f"{t}/{n}.xml",
                kind="object",
                name=n,
                owner=f"{t}.{n}",
                object_type=t,
                synonym={"ru": syn},
            )
        )
    store.add(
        Chunk(
            id="Справочник/Валюты.xml::Реквизит:ФормулаРасчетаКурса",
            path="Справочник/Валюты.xml",
            kind="attribute",
            name="ФормулаРасчетаКурса",
            owner="Справочник.Валюты",
            object_type="Справочник",
            symbol="Реквизит:ФормулаРасчетаКурса",
        )
    )
    ow = ObjectWords()
    ow.build(store)
    assert [o for _, o, _ in ow.named(set(name_words("регистр курсов валют")), None)] == ["РегистрСведений.КурсыВалют"]
    named = ow.named(set(name_words("где хранятся данные о пользователях")), ("Справочник",))
    assert [(o, n) for _, o, n in named] == [("Справочник.Пользователи", 1)]
    toks = set(name_words("где у валюты задается формула расчета курса"))
    assert [store.ids[s] for s, _ in ow.fields("Справочник.Валюты", toks)] == [
        "Справочник/Валюты.xml::Реквизит:ФормулаРасчетаКурса"
    ]
    assert ow.fields("Справочник.Валюты", set(name_words("формула валюты"))) == []


def test_a_tabular_section_attribute_is_named_with_its_section():
    from daemon.contract import Chunk
    from daemon.index.chunkstore import ChunkStore

    store = ChunkStore()
    base = dict(path="Catalogs/Контрагенты.xml", owner="Справочник.Контрагенты", object_type="Справочник")
    store.add(Chunk(id="Catalogs/Контрагенты.xml::", kind="object", name="Контрагенты", **base))
    store.add(
        Chunk(id="c::ТЧ", kind="tabular_section", name="КонтактныеЛица", symbol="ТабличнаяЧасть:КонтактныеЛица", **base)
    )
    store.add(Chunk(id="c::Тел", kind="attribute", name="Телефон", symbol="Реквизит:КонтактныеЛица.Телефон", **base))
    ow = ObjectWords()
    ow.build(store)
    toks = set(name_words("телефон контактного лица контрагента"))
    assert [(store.ids[s], len(w)) for s, w in ow.fields("Справочник.Контрагенты", toks)] == [
        ("c::Тел", 3),
        ("c::ТЧ", 2),
    ]
    # the attribute's own name is enough to match; the section's words only rank it
    assert [store.ids[s] for s, _ in ow.fields("Справочник.Контрагенты", set(name_words("телефон контрагента")))] == [
        "c::Тел"
    ]
