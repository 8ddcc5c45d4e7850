"""Symbol-name channel (daemon/index/names.py): match kinds and their order, qualified queries,
add/remove consistency against a brute-force reference, persistence, and the dev gold set's
symbol queries on the real ssl31-ru / ssl31-en code."""

from __future__ import annotations

import json
import os
import random
import re
import math
import tempfile
from collections import Counter

import msgspec
import numpy as np
import pytest

from daemon.text.folding import fold, split_words
from daemon.dev.evaluate import score
from daemon.index.names import SymbolError, SymbolIndex, SymbolState, api_boost
from daemon.index.names_files import STATE_LAYOUT
from daemon.index.names_match import MATCH_KINDS
from daemon.index.names_table import BOOST_RESOLUTION, composite, composites
from daemon.index.names_words import humps, is_identifier_query, word_splits

from shared_paths import EVAL_DIR


class Keyed:
    """Chunk ids over a slot-keyed :class:`SymbolIndex`, as the chunk store does it: a slot
    per key from a free list (so slots are reused), ``key_of`` for the tie-breaks, ``allow``
    predicates on keys turned into a bool mask indexed by slot."""

    def __init__(self, idx: SymbolIndex | None = None, ids: list | None = None) -> None:
        self.idx = idx if idx is not None else SymbolIndex()
        self.ids: list[str | None] = list(ids or [])
        self.slot_of = {k: s for s, k in enumerate(self.ids) if k is not None}
        self.free = [s for s, k in enumerate(self.ids) if k is None]

    def add(self, key, name, **kw):
        slot = self.slot_of.get(key)
        if slot is None:
            slot = self.free.pop() if self.free else len(self.ids)
            if slot == len(self.ids):
                self.ids.append(key)
            self.ids[slot] = key
            self.slot_of[key] = slot
        self.idx.add(slot, name, **kw)

    def remove(self, key):
        slot = self.slot_of.get(key)
        if slot is None:
            assert not self.idx.remove(len(self.ids) + 5)
            return False
        assert self.idx.remove(slot)
        del self.slot_of[key]
        self.ids[slot] = None
        self.free.append(slot)
        return True

    def get(self, key):
        slot = self.slot_of.get(key)
        return None if slot is None else self.idx.get(slot)

    def __len__(self):
        return len(self.idx)

    def __contains__(self, key):
        return key in self.slot_of and self.slot_of[key] in self.idx

    def flush(self):
        self.idx.flush()

    def search(self, query, k, allow=None):
        mask = None if allow is None else np.array([k_ is not None and allow(k_) for k_ in self.ids], dtype=bool)
        hits = self.idx.search(query, k, allow=mask, key_of=self.ids.__getitem__)
        if allow is not None:  # a predicate on the slot gives the same
            assert hits == self.idx.search(query, k, allow=lambda s: allow(self.ids[s]), key_of=self.ids)
        return [(self.ids[s], v, kind) for s, v, kind in hits]


def _index(entries):
    idx = Keyed()
    for key, name, *rest in entries:
        cont = rest[0] if rest else ""
        boost = rest[1] if len(rest) > 1 else 0.0
        idx.add(key, name, container=cont, boost=boost)
    return idx


def _keys(hits):
    return [k for k, _, _ in hits]


def _kinds(hits):
    return [kind for _, _, kind in hits]


# --- match kinds ---------------------------------------------------------------------------

NAMES = [
    ("m1", "ЗначениеРеквизитаОбъекта", "ОбщегоНазначения", 3.0),
    ("m2", "ЗначенияРеквизитовОбъекта", "ОбщегоНазначения", 3.0),
    ("m3", "ЗначенияРеквизитовОбъектов", "ОбщегоНазначения", 3.0),
    ("m4", "ЗначениеРеквизитаОбъекта", "СервисКриптографииDSSСлужебный", 1.0),
    ("m5", "ЗаполнитьРеквизитыОбъекта", "ОбщегоНазначения", 3.0),  # З|Р|О but not Зн|Рек|Об
    ("m6", "ПолучитьЗначениеРеквизитаОбъекта", "Прочее", 3.0),  # humps not from word 1
    ("m7", "ОбработкаЗаполнения", "Документ", 0.0),
    ("m8", "ГлобальнаяСервернаяПроцедура", "Глобальный", 0.0),
    ("m9", "ОтчетПоВерсииОбъекта", "ВерсионированиеОбъектов", 2.0),
    ("m10", "ОтправитьSMS", "ОтправкаSMS", 3.0),
    ("m11", "HTTPЗапросПолучить", "ИнтернетСервисы", 0.0),
]


def test_camelhump_word_starts_from_the_first_word():
    idx = _index(NAMES)
    hits = idx.search("ЗнРекОб", 10)
    assert set(_keys(hits)) == {"m1", "m2", "m3", "m4"}
    assert set(_kinds(hits)) == {"camelhump"}
    assert _keys(idx.search("ОбрЗап", 10)) == ["m7"]
    assert _keys(idx.search("ГСП", 10)) == ["m8"]
    assert _kinds(idx.search("ГСП", 10)) == ["camelhump"]
    # acronyms: letter by letter (the gold set's "split at capitals") or whole
    assert _keys(idx.search("ОтпрSMS", 10)) == ["m10"]
    assert _keys(idx.search("HttpЗап", 10)) == ["m11"]
    assert _keys(idx.search("HTTPЗапПол", 10)) == ["m11"]
    # a lowercase query has no humps: no camelhump match
    assert idx.search("знрекоб", 10) == []


def test_kinds_order_exact_prefix_camelhump_substring():
    idx = _index(
        [
            ("sub", "ПолучитьЗаписьЖурнала", "", 9.0),
            ("hump", "ЗаписьЖурналаРегистрации", "", 9.0),
            ("prefix", "ЗаписатьЖурналСобытий", "", 9.0),
            ("exact", "ЗаписатьЖурнал", "", -5.0),
        ]
    )
    # exact (despite the lowest boost) > prefix > camelhump ("Зап|Жур" -> Запись|Журнала) > substring
    hits = idx.search("ЗаписатьЖурнал", 10)
    assert _keys(hits) == ["exact", "prefix"]  # "записатьжурнал" is no substring of the others
    hits = idx.search("ЗапЖур", 10)  # Зап|Жур: three CamelHump matches, ordered by boost, length
    assert _kinds(hits) == ["camelhump"] * 3
    assert _keys(hits) == ["prefix", "hump", "exact"]  # boost 9 (shorter name first), then -5
    hits = idx.search("ЗаписьЖурнала", 10)
    assert _keys(hits) == ["hump", "sub"]
    assert _kinds(hits) == ["prefix", "substring"]
    scores = [s for _, s, _ in hits]
    assert scores == sorted(scores, reverse=True)


def test_match_kinds_are_the_documented_four():
    assert MATCH_KINDS == ("exact", "prefix", "camelhump", "substring")
    idx = _index(NAMES)
    for q in ["ЗначениеРеквизитаОбъекта", "ЗначениеРекв", "ЗнРекОб", "реквизитаобъекта"]:
        assert set(_kinds(idx.search(q, 10))) <= set(MATCH_KINDS)


def test_exact_beats_prefix_and_scores_are_banded():
    idx = _index([("a", "СкачатьФайл", "", -2.0), ("b", "СкачатьФайлНаСервере", "", 4.0)])
    hits = idx.search("СкачатьФайл", 10)
    assert _keys(hits) == ["a", "b"]
    assert 39 < hits[0][1] < 41 and 29 < hits[1][1] < 31


def test_case_and_yo_insensitive():
    idx = _index(NAMES)
    assert _keys(idx.search("ОтчётПоВерсииОбъекта", 3)) == ["m9"]
    assert _kinds(idx.search("ОтчётПоВерсииОбъекта", 3)) == ["exact"]
    assert _keys(idx.search("отчетповерсииобъекта", 3)) == ["m9"]
    assert _keys(idx.search("ОТЧЕТПОВЕРС", 3)) == ["m9"]


def test_same_name_ordered_by_boost_then_shorter():
    idx = _index(
        [
            (
                "CommonModules/ПользователиСлужебный/Ext/Module.bsl::ТекущийПользователь",
                "ТекущийПользователь",
                "ПользователиСлужебный",
                2.0,
            ),
            (
                "CommonModules/Пользователи/Ext/Module.bsl::ТекущийПользователь",
                "ТекущийПользователь",
                "Пользователи",
                4.0,
            ),
            ("CommonForms/Ф/Ext/Form/Module.bsl::ТекущийПользователь", "ТекущийПользователь", "Ф", 0.0),
            (
                "CommonModules/ПользователиКлиент/Ext/Module.bsl::ТекущийПользователь",
                "ТекущийПользователь",
                "ПользователиКлиент",
                4.0,
            ),
        ]
    )
    assert [k.split("/")[1] for k in _keys(idx.search("ТекущийПользователь", 10))] == [
        "Пользователи",  # boost 4, shorter key
        "ПользователиКлиент",  # boost 4
        "ПользователиСлужебный",
        "Ф",
    ]
    # boosts closer than the resolution count as equal: the shorter key wins
    idx.add("long-key-x", "Имя", boost=1.0)
    idx.add("k", "Имя", boost=1.0 - BOOST_RESOLUTION / 10)
    assert _keys(idx.search("Имя", 2)) == ["k", "long-key-x"]


def test_substring_needs_three_chars_and_fewer_than_k_better():
    idx = _index([("a", "ЗначениеРеквизитаОбъекта"), ("b", "РеквизитыФормы")])
    assert _keys(idx.search("РеквизитаОбъекта", 5)) == ["a"]
    assert _kinds(idx.search("РеквизитаОбъекта", 5)) == ["substring"]
    assert _keys(idx.search("Рек", 5)) == ["b", "a"]  # prefix first, then substring
    assert _keys(idx.search("Рек", 1)) == ["b"]
    assert idx.search("ек", 5) == []  # 2 characters: no substring scan


# --- qualified -----------------------------------------------------------------------------


def _qualified_index(make=None):
    return (make or _index)(
        [
            ("cm::ЗРО", "ЗначениеРеквизитаОбъекта", "ОбщегоНазначения", 3.0),
            ("cm::ЗРОв", "ЗначениеРеквизитаОбъектов", "ОбщегоНазначения", 3.0),
            ("dss::ЗРО", "ЗначениеРеквизитаОбъекта", "СервисКриптографииDSS", 1.0),
            ("cmc::ЗРО", "ЗначениеРеквизитаОбъекта", "ОбщегоНазначенияКлиент", 3.0),
            ("fs::ЗП", "ЗапуститьПрограмму", "ФайловаяСистема", 3.0),
            ("fsc::ЗП", "ЗапуститьПрограмму", "ФайловаяСистемаКлиент", 3.0),
            ("cat::Пользователи", "Пользователи", ["Справочник", "Справочники", "Catalog", "Catalogs"], 0.0),
            ("cat::Users", "Users", ["Справочник", "Справочники", "Catalog", "Catalogs"], 0.0),
            ("reg::Пользователи", "ПользователиИнформационнойБазы", ["РегистрСведений", "InformationRegister"], 0.0),
        ]
    )


def test_qualified_module_method():
    idx = _qualified_index()
    hits = idx.search("ОбщегоНазначения.ЗначениеРеквизитаОбъекта", 10)
    # exact container first, then the prefix container (…Клиент), then name-only matches
    assert _keys(hits)[:2] == ["cm::ЗРО", "cmc::ЗРО"]
    assert "dss::ЗРО" in _keys(hits)[2:]
    assert hits[0][1] > 39 and hits[-1][1] < 1  # name-only hits sit 40 lower
    assert _keys(idx.search("ДругойМодуль.ЗначениеРеквизитаОбъекта", 10))[:1] in (["cm::ЗРО"], ["cmc::ЗРО"])


def test_qualified_incomplete_name_and_counterpart():
    idx = _qualified_index()
    hits = idx.search("ФайловаяСистемаКлиент.ЗапуститьПрогр", 10)
    assert _keys(hits) == ["fsc::ЗП", "fs::ЗП"]  # the counterpart module follows, name-only
    assert _kinds(hits) == ["prefix", "prefix"]
    assert hits[0][1] > hits[1][1] + 30
    hits = idx.search("ОбщегоНазначения.ЗначениеРекв", 10)
    assert _keys(hits)[:3] == ["cm::ЗРО", "cm::ЗРОв", "cmc::ЗРО"]
    # empty name part: list the container
    assert set(_keys(idx.search("ОбщегоНазначения.", 10))) == {"cm::ЗРО", "cm::ЗРОв", "cmc::ЗРО"}
    # CamelHump on both sides (both containers match as CamelHump: shorter name first)
    assert _keys(idx.search("ОбщНаз.ЗнРекОб", 10))[:3] == ["cm::ЗРО", "cmc::ЗРО", "cm::ЗРОв"]


def test_qualified_metadata_ru_and_en():
    idx = _qualified_index()
    assert _keys(idx.search("Справочник.Пользователи", 1)) == ["cat::Пользователи"]
    assert _keys(idx.search("Справочники.Пользователи", 1)) == ["cat::Пользователи"]
    assert _keys(idx.search("Catalog.Users", 1)) == ["cat::Users"]
    assert _keys(idx.search("catalogs.users", 1)) == ["cat::Users"]
    assert _keys(idx.search("Спр.Польз", 1)) == ["cat::Пользователи"]
    hits = idx.search("РегистрСведений.Пользователи", 10)
    assert _keys(hits)[0] == "reg::Пользователи"  # qualified prefix before name-only exact
    assert _keys(hits)[1] == "cat::Пользователи"
    # a longer qualifier falls back to its last segment
    assert _keys(idx.search("ОбщийМодуль.ОбщегоНазначения.ЗначениеРеквизитаОбъекта", 1)) == ["cm::ЗРО"]


# --- identifier detection, cleaning, edge cases --------------------------------------------


@pytest.mark.parametrize(
    "query,expected",
    [
        ("ЗнРекОб", True),
        ("ОбщегоНазначения.ЗначениеРекв", True),
        ("Справочник.Пользователи", True),
        ("ОбщегоНазначения.", True),
        ("  СообщитьПользователю()  ", True),
        ("_ПриватнаяПеременная", True),
        ("MessageToUser", True),
        ("ОтправитьSMS2", True),
        ("как отправить письмо", False),
        ("отправить письмо", False),
        ("НФ-001", False),
        ("a+b", False),
        ("1С", False),
        ("Модуль..Метод", False),
        (".Метод", False),
        ("", False),
        ("   ", False),
    ],
)
def test_is_identifier_query(query, expected):
    assert is_identifier_query(query) is expected


def test_non_identifier_queries_empty_index_and_k():
    idx = _index(NAMES)
    assert idx.search("отправить письмо", 10) == []
    assert idx.search("ЗначениеРеквизитаОбъекта", 0) == []
    assert SymbolIndex().search("ЗначениеРеквизитаОбъекта", 10) == []
    assert _keys(idx.search("ЗначениеРеквизитаОбъекта()", 1)) == ["m1"]


def test_humps():
    assert humps("ЗнРекОб") == ["зн", "рек", "об"]
    assert humps("ГСП") == ["г", "с", "п"]
    assert humps("знРекОб") == ["зн", "рек", "об"]
    assert humps("Base64Строка") == ["base", "64", "строка"]
    assert humps("мой_метод") == ["мой", "метод"]


def test_allow_filter():
    idx = _index(NAMES)
    hits = idx.search("ЗнРекОб", 10, allow=lambda key: key != "m1")
    assert "m1" not in _keys(hits) and len(hits) == 3


def test_invalid_add():
    idx = Keyed()
    with pytest.raises(ValueError):
        idx.add("k", "")
    with pytest.raises(ValueError):
        idx.add("k", "Имя", boost=math.nan)


def test_api_boost_rule():
    public = api_boost(
        export=True, module_kind="common", owner="ОбщийМодуль.ОбщегоНазначения", region=("ПрограммныйИнтерфейс",)
    )
    internal = api_boost(
        export=True,
        module_kind="common",
        owner="ОбщийМодуль.ОбщегоНазначенияСлужебный",
        region=("СлужебныйПрограммныйИнтерфейс",),
    )
    deprecated = api_boost(
        export=True,
        module_kind="common",
        owner="ОбщийМодуль.ОбщегоНазначения",
        region=("ПрограммныйИнтерфейс", "УстаревшиеПроцедурыИФункции"),
    )
    form = api_boost(export=False, module_kind="form", owner="Справочник.Пользователи.Форма.ФормаЭлемента")
    assert public == 4.0 and internal == 2.0 and deprecated == 2.5 and form == 1.0
    assert api_boost(export=True, module_kind="common", owner="CommonModule.CommonInternal") == 2.0
    assert api_boost(export=True, module_kind="common", owner="ОбщийМодуль.ВерсионированиеОбъектовСобытия") == 2.0
    called = api_boost(export=True, module_kind="common", owner="ОбщийМодуль.X", references=3900)
    assert called == pytest.approx(3.0 + 0.25 * math.log1p(3900))


# --- consistency against a brute-force reference --------------------------------------------


def _ref_name_rank(name: str, fq: str, q_humps: list[str]) -> int | None:
    f = fold(name)
    if f == fq:
        return 0
    if f.startswith(fq):
        return 1
    if len(q_humps) >= 2:
        for words in (humps(name), [fold(w) for w in split_words(name)]):
            if len(words) >= len(q_humps) and all(w.startswith(h) for w, h in zip(words, q_humps, strict=False)):
                return 2
    if len(fq) >= 3 and fq in f:
        return 3
    return None


def _ref_cont_rank(conts, cq: str) -> int | None:
    fcq, c_humps = fold(cq), humps(cq)
    best = None
    for c in conts:
        r = _ref_name_rank(c, fcq, c_humps)
        if r is None or r == 3:
            continue
        best = r if best is None else min(best, r)
    return best


def _reference_search(live: dict, query: str, k: int) -> list[str]:
    """The documented rules, by brute force: live = key -> (name, containers, boost)."""
    q = query.strip()
    if not is_identifier_query(q):
        return []
    rows = []

    def order(key, name, boost):
        return (-round(boost / BOOST_RESOLUTION), len(fold(name)), len(key), key)

    if "." in q:
        cq, _, nq = q.rpartition(".")
        fnq, nq_humps = fold(nq), humps(nq)

        def qualified(cq):
            out = []
            for key, (name, conts, boost) in live.items():
                cr = _ref_cont_rank(conts, cq)
                nr = 1 if not fnq else _ref_name_rank(name, fnq, nq_humps)
                if cr is not None and nr is not None:
                    out.append(((0, nr, cr) + order(key, name, boost), key))
            return out

        rows = qualified(cq)
        if not rows and "." in cq:
            rows = qualified(cq.rpartition(".")[2])
        done = {key for _, key in rows}
        if fnq:
            for key, (name, _conts, boost) in live.items():
                nr = _ref_name_rank(name, fnq, nq_humps)
                if nr is not None and key not in done:
                    rows.append(((1, nr, 0) + order(key, name, boost), key))
    else:
        fq, q_humps = fold(q), humps(q)
        acronym = re.fullmatch(r"[A-ZА-ЯЁ]{2,8}", q) is not None
        for key, (name, _conts, boost) in live.items():
            nr = _ref_name_rank(name, fq, q_humps)
            # an acronym is first a word: a name holding it as a word part (not at its start)
            # ranks between the prefix and the CamelHump matches
            if acronym and len(fq) >= 3 and nr in (2, 3) and any(fold(w) == fq for w in split_words(name)):
                nr = 1.5
            if nr is not None:
                rows.append(((0, nr, 0) + order(key, name, boost), key))
    rows.sort()
    return [key for _, key in rows[:k]]


WORDS = [
    "Значение",
    "Реквизита",
    "Объекта",
    "Получить",
    "Записать",
    "Журнал",
    "Пользователь",
    "SMS",
    "HTTP",
    "Форма",
    "Ёмкость",
    "Зн",
    "Рек",
    "2",
]
MODULES = [
    "ОбщегоНазначения",
    "ОбщегоНазначенияКлиент",
    "Пользователи",
    "ПользователиСлужебный",
    "РаботаСФайлами",
    "HTTPСервис",
]


def _random_name(rng: random.Random) -> str:
    return "".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))


def _random_query(rng: random.Random, live: dict) -> str:
    name = rng.choice([v[0] for v in live.values()]) if live and rng.random() < 0.8 else _random_name(rng)
    form = rng.randrange(6)
    if form == 0:
        return name
    if form == 1:
        return name[: rng.randint(1, len(name))]
    if form == 2:
        return "".join(w[: rng.randint(1, 3)] for w in split_words(name)[: rng.randint(1, 3)]) or name
    if form == 3:
        i = rng.randrange(len(name))
        return name[i : i + rng.randint(3, 6)].lower()
    mod = rng.choice(MODULES)
    cq = mod if rng.random() < 0.5 else mod[: rng.randint(1, len(mod))]
    return f"{cq}.{name[: rng.randint(0, len(name))]}"


def test_random_operations_match_brute_force_reference():
    rng = random.Random(20260613)
    idx = Keyed()
    live: dict[str, tuple[str, tuple[str, ...], float]] = {}
    removed: set[str] = set()
    for step in range(3000):
        op = rng.random()
        if op < 0.6 or not live:
            key = f"k{rng.randrange(400)}"
            name = _random_name(rng)
            conts = tuple(rng.sample(MODULES, rng.randint(0, 2)))
            boost = rng.choice([0.0, 1.0, 2.5, rng.uniform(-2, 4)])
            idx.add(key, name, container=conts, boost=boost)
            live[key] = (name, conts, boost)
            removed.discard(key)
        elif op < 0.85:
            key = rng.choice(sorted(live))
            assert idx.remove(key)
            del live[key]
            removed.add(key)
        else:
            assert not idx.remove(f"absent{step}")
        if step % 7 == 0:
            q = _random_query(rng, live)
            k = rng.choice([1, 3, 10, 50])
            got = _keys(idx.search(q, k))
            assert got == _reference_search(live, q, k), (step, q, k)
            assert not removed & set(got)
    assert len(idx) == len(live)
    assert all(idx.get(k)[0] == v[0] for k, v in live.items())


def test_removed_keys_never_return_across_rebuild():
    idx = Keyed()
    for i in range(3000):
        idx.add(f"k{i}", f"ИмяМетода{i}", container="Модуль")
    for i in range(0, 3000, 2):
        assert idx.remove(f"k{i}")  # crosses the compaction threshold
    assert len(idx) == 1500
    hits = idx.search("ИмяМетода", 5000)
    assert len(hits) == 1500 and all(int(k[1:]) % 2 for k in _keys(hits))
    assert idx.search("ИмяМетода10", 5) and _keys(idx.search("ИмяМетода10", 5))[0] != "k10"
    assert "k10" not in _keys(idx.search("Модуль.ИмяМетода10", 50))
    idx.add("k10", "ДругоеИмя")  # re-added under a new name: found by it only
    assert _keys(idx.search("ДругоеИмя", 5)) == ["k10"]
    assert "k10" not in _keys(idx.search("ИмяМетода10", 50))


def test_replace_changes_name_container_and_boost():
    idx = Keyed()
    idx.add("k", "СтароеИмя", container="А", boost=1.0)
    idx.add("k", "НовоеИмя", container="Б", boost=2.0)
    assert len(idx) == 1
    assert idx.search("СтароеИмя", 5) == []
    assert idx.search("А.НовоеИмя", 5)[0][1] < 1  # name-only now
    assert _keys(idx.search("Б.НовоеИмя", 5)) == ["k"]
    assert idx.get("k") == ("НовоеИмя", ("Б",), "", 2.0)


def test_string_keys_are_refused():
    """The index is keyed by chunk slots only (the string-key compatibility path is gone)."""
    idx = SymbolIndex()
    with pytest.raises(TypeError):
        idx.add("cm::ЗРО", "ЗначениеРеквизитаОбъекта")
    idx.add(3, "ЗначениеРеквизитаОбъекта")
    assert "cm::ЗРО" not in idx and 3 in idx
    with pytest.raises(TypeError):
        idx.remove("cm::ЗРО")
    state = idx.to_state()
    with pytest.raises(ValueError):
        SymbolIndex.from_state(msgspec.structs.replace(state, keys=["cm::ЗРО"]))


def test_state_round_trip():
    idx = _qualified_index()
    idx.remove("fs::ЗП")
    state = idx.idx.to_state()
    assert state.keys == []
    restored = Keyed(
        SymbolIndex.from_state(msgspec.msgpack.decode(msgspec.msgpack.encode(state), type=SymbolState)), idx.ids
    )
    assert restored.idx.to_state() == state
    for q in ["ЗначениеРеквизитаОбъекта", "ОбщНаз.ЗнРекОб", "Спр.Польз", "ЗапуститьПрогр", "Рекв"]:
        assert restored.search(q, 10) == idx.search(q, 10)
    with pytest.raises(ValueError):
        SymbolIndex.from_state(msgspec.structs.replace(state, names=state.names[:-1]))
    slots = np.frombuffer(state.slots, dtype="<u4").copy()
    slots[1] = slots[0]
    with pytest.raises(ValueError):
        SymbolIndex.from_state(msgspec.structs.replace(state, slots=slots.tobytes()))


def _round_trip(idx: Keyed, mmap: bool = True) -> Keyed:
    """Column files out and back in: the same state (derived arrays included)."""
    with tempfile.TemporaryDirectory() as tmp:
        idx.idx.save(tmp)
        restored = Keyed(SymbolIndex.load(tmp, mmap=mmap, verify=True), idx.ids)
    assert restored.idx.to_state() == idx.idx.to_state()
    return restored


def test_bulk_loads_and_state_round_trips_match_reference():
    """Bursts of additions (bulk trigram indexing, sorted merges), removals that leave dead
    ids behind, and state round trips (derived arrays renumbered) in between: every search
    equals the brute-force reference, and a restored index keeps working incrementally."""
    rng = random.Random(20260614)
    idx = Keyed()
    live: dict[str, tuple[str, tuple[str, ...], float]] = {}
    for _round in range(40):
        for _ in range(rng.choice([1, 5, 70, 300])):
            key = f"k{rng.randrange(1500)}"
            name = _random_name(rng)
            conts = tuple(rng.sample(MODULES, rng.randint(0, 2)))
            boost = rng.choice([0.0, 1.0, 2.5, rng.uniform(-2, 4)])
            idx.add(key, name, container=conts, boost=boost)
            live[key] = (name, conts, boost)
        for key in rng.sample(sorted(live), min(len(live), rng.choice([0, 3, 40]))):
            assert idx.remove(key)
            del live[key]
        if rng.random() < 0.4:
            idx = _round_trip(idx, mmap=rng.random() < 0.5)
        for _ in range(6):
            q = _random_query(rng, live)
            k = rng.choice([1, 3, 10, 50])
            assert _keys(idx.search(q, k)) == _reference_search(live, q, k), (q, k)
    assert len(idx) == len(live)


def test_bulk_trigrams_equal_one_by_one():
    rng = random.Random(9)
    names = [_random_name(rng) + rng.choice(["", "ё", "Ё", "ß", "İ", "\U0001f600x"]) for _ in range(500)]
    bulk, single = Keyed(), Keyed()
    for i, name in enumerate(names):
        bulk.add(f"k{i}", name)
        single.add(f"k{i}", name)
        single.flush()  # one at a time: the Python path
    bulk.flush()
    assert {t: list(p) for t, p in bulk.idx._table.tri.items()} == {
        t: list(p) for t, p in single.idx._table.tri.items()
    }


def test_composites_match_one_by_one():
    rng = random.Random(2)
    boosts = [rng.choice([0.0, 0.0005, 0.0015, -0.0025, 1.5, 1e12, -1e12, rng.uniform(-5, 5)]) for _ in range(300)]
    fnames = ["x" * rng.randint(1, 5000) for _ in boosts]
    got = composites(np.asarray(boosts), fnames).tolist()
    assert got == [composite(b, len(f)) for b, f in zip(boosts, fnames, strict=True)]


def test_old_or_damaged_state_is_rejected():
    state = _qualified_index().idx.to_state()
    assert state.layout == STATE_LAYOUT
    old = SymbolState(
        keys=state.keys, names=state.names, containers=state.containers, kinds=state.kinds, boosts=state.boosts
    )
    decoded = msgspec.msgpack.decode(msgspec.msgpack.encode(old), type=SymbolState)
    bad = [
        decoded,  # a layout-1 file: no derived columns
        msgspec.structs.replace(state, sigs=state.sigs[:-1]),
        msgspec.structs.replace(state, by_name=state.by_name[:-4]),
        msgspec.structs.replace(state, by_name=state.by_name[:-4] + state.by_name[:4]),
        msgspec.structs.replace(state, by_cont=state.by_cont[4:]),
        msgspec.structs.replace(state, tri_ids=state.tri_ids[:-4] + b"\xff\xff\x00\x00"),
        msgspec.structs.replace(state, tri_offsets=state.tri_offsets[:-4]),
        msgspec.structs.replace(state, boosts=[math.inf] + state.boosts[1:]),
        msgspec.structs.replace(state, names=[""] + state.names[1:]),
    ]
    for s in bad:
        with pytest.raises(ValueError):
            SymbolIndex.from_state(s)


def test_save_load_then_increments_match_reference(tmp_path):
    """A loaded index (memory-mapped columns) takes adds, replaces and removals (slots
    reused) and still equals the brute-force reference; the saved files are not written."""
    rng = random.Random(31)
    idx = Keyed()
    live: dict[str, tuple[str, tuple[str, ...], float]] = {}
    for i in range(600):
        key, name = f"k{i}", _random_name(rng)
        conts = tuple(rng.sample(MODULES, rng.randint(0, 2)))
        idx.add(key, name, container=conts, boost=rng.uniform(-2, 4))
        live[key] = (name, conts, idx.get(key)[3])
    for key in rng.sample(sorted(live), 150):
        idx.remove(key)
        del live[key]
    idx.idx.save(tmp_path / "n")
    files = {p.name: p.read_bytes() for p in (tmp_path / "n").iterdir()}
    idx = Keyed(SymbolIndex.load(tmp_path / "n"), idx.ids)
    for step in range(800):
        if rng.random() < 0.6:
            key = f"k{rng.randrange(900)}"
            name = _random_name(rng)
            conts = tuple(rng.sample(MODULES, rng.randint(0, 2)))
            boost = rng.choice([0.0, 1.0, rng.uniform(-2, 4)])
            idx.add(key, name, container=conts, boost=boost)
            live[key] = (name, conts, boost)
        elif live:
            key = rng.choice(sorted(live))
            assert idx.remove(key)
            del live[key]
        if step % 9 == 0:
            q = _random_query(rng, live)
            k = rng.choice([1, 10, 50])
            assert _keys(idx.search(q, k)) == _reference_search(live, q, k), (step, q, k)
    assert {p.name: p.read_bytes() for p in (tmp_path / "n").iterdir()} == files


def test_slots_reused_and_allow_mask():
    idx = SymbolIndex()
    idx.add(0, "ПервыйМетод", container="Модуль")
    idx.add(1, "ВторойМетод", container="Модуль")
    assert idx.remove(0) and not idx.remove(0) and not idx.remove(99)
    idx.add(0, "ТретийМетод")
    assert [s for s, _, _ in idx.search("ПервыйМетод", 5)] == []
    assert [s for s, _, _ in idx.search("ТретийМетод", 5)] == [0]
    assert [s for s, _, _ in idx.search("Модуль.", 5)] == [1]
    assert idx.search("ВторойМетод", 5, allow=np.array([True])) == []  # slot 1 beyond the mask
    assert [s for s, _, _ in idx.search("ВторойМетод", 5, allow=np.array([False, True]))] == [1]
    assert 0 in idx and 2 not in idx and "x" not in idx and idx.get(1)[0] == "ВторойМетод"
    with pytest.raises(ValueError):
        idx.add(-1, "Имя")
    with pytest.raises(ValueError):
        idx.add(3, "Имя\x1fДругое")
    with pytest.raises(TypeError):
        idx.add("key", "Имя")  # slots only


def test_ties_go_by_shorter_key_then_key():
    idx = SymbolIndex()
    keys = ["bb", "a", "ab", "c"]
    for s in range(4):
        idx.add(s, "ОдинаковоеИмя")
    assert [keys[s] for s, _, _ in idx.search("ОдинаковоеИмя", 4, key_of=keys)] == ["a", "c", "ab", "bb"]
    assert [s for s, _, _ in idx.search("ОдинаковоеИмя", 4)] == [0, 1, 2, 3]


def test_damaged_saved_names_raise_symbol_error(tmp_path):
    idx = _qualified_index()
    good = tmp_path / "good"
    idx.idx.save(good)
    assert len(SymbolIndex.load(good, verify=True)) == len(idx)

    def copy(label):
        bad = tmp_path / label
        bad.mkdir()
        for p in good.iterdir():
            (bad / p.name).write_bytes(p.read_bytes())
        return bad

    def bump_last_u4(b):
        return b[:-4] + (int.from_bytes(b[-4:], "little") + 1).to_bytes(4, "little")

    cases = {
        "trunc": ("by_name.npy", lambda b: b[:-8]),
        "header": ("header.json", lambda b: b"[]"),
        "layout": ("header.json", lambda b: b.replace(b'"layout": 2', b'"layout": 1')),
        "offsets": ("names_off.npy", bump_last_u4),  # same size, text shorter than the offsets
        "kinds": ("kinds_ids.npy", lambda b: b[:-4] + b"\xff\xff\xff\xff"),  # id out of range
        "perm": ("by_ini.npy", lambda b: b[:-8] + b[-16:-8]),  # a repeated id, same size
        "boosts": ("boosts.npy", lambda b: b[:-8] + np.array([np.inf]).tobytes()),
        "slots": ("slots.npy", lambda b: b[:-4] + b[-8:-4]),  # a slot twice
    }
    for label, (name, fn) in cases.items():
        bad = copy(label)
        (bad / name).write_bytes(fn((bad / name).read_bytes()))
        with pytest.raises(SymbolError, match=label):
            SymbolIndex.load(bad)
    gone = copy("gone")
    (gone / "slots.npy").unlink()
    with pytest.raises(SymbolError):
        SymbolIndex.load(gone)
    flip = copy("flip")
    b = (flip / "boosts.npy").read_bytes()
    (flip / "boosts.npy").write_bytes(b[:-1] + bytes([b[-1] ^ 1]))
    SymbolIndex.load(flip)
    with pytest.raises(SymbolError, match="CRC"):
        SymbolIndex.load(flip, verify=True)


# --- real code and the dev gold set ----------------------------------------------------------

_HEADER_RE = re.compile(
    r"^[ \t]*(?:Асинх[ \t]+|Async[ \t]+)?(?:Процедура|Функция|Procedure|Function)"
    r"[ \t]+(\w+)[ \t]*\(([^)]*)\)[ \t]*(Экспорт|Export)?",
    re.I | re.M,
)
_REGION_RE = re.compile(r"^[ \t]*#(?:(?:Область|Region)[ \t]+(\w+)|(КонецОбласти|EndRegion))", re.I | re.M)
_CALL_RE = re.compile(r"(\w+)\.(\w+)\s*\(")


def _module_kind(path: str) -> tuple[str, str]:
    """(module kind, owner) from an export path -- a stand-in for the chunker's fields."""
    parts = path.split("/")
    if parts[0] == "CommonModules":
        return "common", f"ОбщийМодуль.{parts[1]}"
    if "/Forms/" in path or parts[0] == "CommonForms":
        return "form", f"{parts[0]}.{parts[1]}"
    kinds = {
        "ObjectModule.bsl": "object",
        "ManagerModule.bsl": "manager",
        "RecordSetModule.bsl": "recordset",
        "ValueManagerModule.bsl": "value_manager",
        "CommandModule.bsl": "command",
    }
    return kinds.get(parts[-1], "other"), f"{parts[0]}.{parts[1] if len(parts) > 2 else ''}"


def _scan(root):
    """Regex scan of every .bsl: (path, name, export, region stack) per method, and the
    number of qualified calls ``Module.Method(`` / ``МодульModule.Method(`` per folded pair."""
    methods, calls = [], Counter()
    for dirpath, _dirs, files in os.walk(root):
        for fname in files:
            if not fname.endswith(".bsl"):
                continue
            full = os.path.join(dirpath, fname)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            with open(full, encoding="utf-8-sig") as fh:
                text = fh.read()
            events = sorted(
                [(m.start(), 0, m) for m in _REGION_RE.finditer(text)]
                + [(m.start(), 1, m) for m in _HEADER_RE.finditer(text)],
                key=lambda e: e[0],
            )
            stack: list[str] = []
            for _, typ, m in events:
                if typ == 0:
                    if m.group(1):
                        stack.append(m.group(1))
                    elif stack:
                        stack.pop()
                else:
                    methods.append((rel, m.group(1), bool(m.group(3)), tuple(stack)))
            for mod, meth in _CALL_RE.findall(text):
                mod = fold(mod)
                if mod.startswith("модуль") and len(mod) > 6:
                    mod = mod[6:]
                elif mod.startswith("module") and len(mod) > 6:
                    mod = mod[6:]
                calls[(mod, fold(meth))] += 1
    return methods, calls


def _build_real_index(root):
    methods, calls = _scan(root)
    idx = Keyed()
    seen: Counter = Counter()
    for path, name, export, region in methods:
        key = f"{path}::{name}"
        seen[key] += 1
        if seen[key] > 1:
            key += f"@{seen[key]}"
        kind, owner = _module_kind(path)
        short = owner.split(".", 1)[1]
        boost = api_boost(
            export=export,
            module_kind=kind,
            owner=owner,
            region=region,
            references=calls[(fold(short), fold(name))],
        )
        idx.add(key, name, container=short, boost=boost)
    return idx, methods


# Reference scoring, copied verbatim from shared/eval/README.md ("Scoring").
def _gold(corpus: str) -> list[dict]:
    path = EVAL_DIR / "gold_dev.jsonl"
    if not path.exists():
        pytest.skip(f"gold set not found at {path}")
    with open(path, encoding="utf-8") as fh:
        entries = [json.loads(line) for line in fh if line.strip()]
    return [e for e in entries if e["intent"] == "symbol" and e["corpus"] == corpus]


def _evaluate(idx, gold):
    results = []
    for entry in gold:
        hits = [k.split("::")[0:2] for k in _keys(idx.search(entry["query"], 10))]
        hits = [(p, s.split("@")[0]) for p, s in hits]
        results.append(score(entry, hits))
    return results


@pytest.fixture(scope="module")
def ssl_ru_symbols(ssl_ru):
    return _build_real_index(ssl_ru)


@pytest.mark.slow
def test_dev_gold_symbol_queries_ssl31_ru(ssl_ru_symbols):
    """Symbol channel alone, 31 dev symbol queries: measured Hit@1 0.968, nDCG@10 0.993."""
    idx, methods = ssl_ru_symbols
    assert len(methods) > 31_000
    gold = _gold("ssl31-ru")
    assert len(gold) >= 30
    res = _evaluate(idx, gold)
    hit1 = sum(r["hit@1"] for r in res) / len(res)
    ndcg = sum(r["ndcg@10"] for r in res) / len(res)
    assert hit1 >= 0.9, f"Hit@1 {hit1:.3f}"
    assert ndcg >= 0.95, f"nDCG@10 {ndcg:.3f}"


@pytest.mark.slow
def test_dev_gold_symbol_queries_ssl31_en(ssl_en):
    idx, _ = _build_real_index(ssl_en)
    gold = _gold("ssl31-en")
    res = _evaluate(idx, gold)
    assert all(r["hit@1"] == 1.0 for r in res), res


@pytest.mark.slow
def test_real_names_every_form_finds_the_name(ssl_ru_symbols):
    """31.6k real names: the exact name comes first as an exact match, and its first half
    finds exact or prefix matches (latency is measured by ``bsl-lens bench``, not here)."""
    idx, methods = ssl_ru_symbols
    rng = random.Random(5)
    names = [name for _, name, _, _ in rng.sample(methods, 300)]
    for n in names:
        exact = idx.search(n, 10)
        assert exact and exact[0][2] == "exact", n
        half = n[: max(3, len(n) // 2)]
        assert any(m in ("exact", "prefix") for _, _, m in idx.search(half, 10)), half


def test_camelhump_over_many_repeated_names_equals_brute_force():
    """Names repeated in many modules (a form's event handlers; each signature is matched
    once per search): the CamelHump tier holds exactly the entries whose words start with
    the humps (either word splitting), for the regex (> 64 distinct signatures) and the
    startswith matcher alike."""
    rng = random.Random(3)
    words = ["При", "Создании", "На", "Сервере", "Записи", "Получить", "Данные", "HTTP", "Запрос", "Сп", "Объекта"]
    names = sorted({"".join(rng.sample(words, rng.randint(2, 4))) for _ in range(400)})
    assert len(names) > 100
    idx = SymbolIndex()
    entries = {}
    slot = 0
    for name in names:
        for _ in range(rng.randint(1, 5)):  # the same name in several modules
            idx.add(slot, name, kind="procedure")
            entries[slot] = name
            slot += 1
    found = 0
    for q in ("ПриСозНа", "ПриСоз", "ПолДан", "HTTPЗап", "ЗапСп", "НаСерПри", "СпОбъ"):
        qh = humps(q)
        rx = re.compile("[^\x00]*\x00".join(re.escape(fold(h)) for h in qh))
        want = {
            s
            for s, n in entries.items()
            if not fold(n).startswith(fold(q))
            and any(rx.match("\x00".join(fold(w) for w in ws)) for ws in (split_words(n), word_splits(n)[0]))
        }
        got = {s for s, _, m in idx.search(q, len(entries)) if m == "camelhump"}
        assert got == want, q
        found += bool(want)
    assert found >= 3
