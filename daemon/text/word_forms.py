"""Russian word forms the Snowball stemmer leaves apart from the forms 1C names use.

A question is written in finite verbs and plural nouns ("перехватывает", "проверяет",
"блокировок"); names and doc comments use infinitives, imperatives and singular nouns
(``ВыполнитьМетодОбъектаСПерехватомОшибки``, ``ПроверитьЗаполнение``,
``УстановитьБлокировку``). Snowball stems these pairs differently (``перехватыва`` /
``перехват``, ``проверя`` / ``провер``, ``блокировок`` / ``блокировк``), so BM25 misses the
match. :func:`extra_stems` gives the stems such a word also stands for; the ranker searches
the ones the index holds (``RankingParams.russian_word_forms``). Measured gain:
``docs/ranking.md``, "russian_word_forms".
"""

from __future__ import annotations

import re

from .tokenize import stem_word

__all__ = ["extra_stems"]

_CYRILLIC_WORD_RE = re.compile(r"^[а-яё]+$")
_VOWELS = frozenset("аеиоуыэюя")
#: Consonants after which the first person and the imperfective insert an ``л``
#: (добавить / добавляет, обновить / обновляет).
_LABIALS = frozenset("бвпмф")
#: Finite and participle forms of ``-овать`` verbs (формирует, используются, кодирующий).
_OVAT_FORM_RE = re.compile(r"(?:ует|уют|уется|уются|ующ[а-я]*)$")


def extra_stems(word: str) -> list[str]:
    """Stems a folded Russian ``word`` stands for besides its Snowball stem, most specific
    first; ``[]`` for a word of fewer than 5 letters or one that is not all Cyrillic.

    * genitive plural with a fleeting vowel, left whole by Snowball: ``блокировок`` ->
      ``блокировк``, ``настроек`` -> ``настройк``;
    * imperfective stems in ``-ыва``/``-ива``: ``перехватывает`` -> ``перехват``;
    * stems in ``-я`` after a consonant: ``проверяет`` -> ``провер``, and after a labial's
      inserted ``л`` also without it: ``добавляет`` -> ``добавл``, ``добав``;
    * stems in ``-а`` after a consonant: ``получает`` -> ``получ``;
    * ``-овать`` verbs: ``формирует`` -> ``формирова``.

    Over-generation is expected and harmless as long as the caller keeps only stems its
    index holds."""
    if len(word) < 5 or not _CYRILLIC_WORD_RE.match(word):
        return []
    stem = stem_word(word)
    out = []
    if stem == word and len(word) >= 6 and word.endswith(("ок", "ек")):
        if word[-3] not in _VOWELS:
            out.append(word[:-2] + "к")
        elif word.endswith("ек"):
            out.append(word[:-2] + "йк")
    if stem.endswith(("ыва", "ива")) and len(stem) >= 8:
        out.append(stem[:-3])
    elif stem.endswith("я") and len(stem) >= 6 and stem[-2] not in _VOWELS:
        out.append(stem[:-1])
        if stem.endswith("ля") and stem[-3] in _LABIALS and len(stem) >= 7:
            out.append(stem[:-2])
    elif stem.endswith("а") and len(stem) >= 6 and stem[-2] not in _VOWELS:
        out.append(stem[:-1])
    if _OVAT_FORM_RE.search(word) and len(stem) >= 4:
        out.append(stem + "ова")
    return out
