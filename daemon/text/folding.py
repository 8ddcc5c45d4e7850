"""Name folding and identifier splitting shared by the tokenizer, the names channel and the
embedded texts.

1C identifiers are case-insensitive and ``ё`` is routinely typed as ``е`` (and vice
versa), so every comparison goes through :func:`fold`.
"""

from __future__ import annotations

import re
import unicodedata

# A word inside an identifier: an uppercase run not followed by lowercase (an acronym such
# as "ИНН", "HTTP", "XML"), a capitalised or lowercase word, or a digit run.
# Works for Cyrillic and Latin alike: "ИННСоответствуетТребованиям" ->
# ["ИНН", "Соответствует", "Требованиям"], "ВыгрузитьТаблицуВExcel" ->
# ["Выгрузить", "Таблицу", "В", "Excel"], "HTTPЗапрос2" -> ["HTTP", "Запрос", "2"].
_SPLIT_RE = re.compile(
    r"""
    [A-ZА-ЯЁ]+(?=[A-ZА-ЯЁ][a-zа-яё])   # acronym before a capitalised word: "ИНН" in "ИННСоотв"
    | [A-ZА-ЯЁ]?[a-zа-яё]+              # capitalised or lowercase word
    | [A-ZА-ЯЁ]+                        # trailing acronym
    | \d+                               # digits
    | [^\W\d_]+                         # any other letters (other scripts)
    """,
    re.VERBOSE,
)


def fold(text: str) -> str:
    """Fold for comparison: Unicode NFC, ``ё``→``е``, then ``str.casefold``.

    Computed as NFC, casefold, then ``ё``→``е`` (the same result for every string:
    casefold maps per character and only ``Ё``/``ё`` fold to ``ё``; checked for every code
    point by ``tests/engine/test_tokenize.py``), with ASCII text just lowercased: faster than
    one ``str.translate`` with a mapping (``docs/internals.md``, "Tokenizer").

    >>> fold("ПолучитьСчёт") == fold("получитьсчет")
    True
    """
    if text.isascii():
        return text.lower()
    return unicodedata.normalize("NFC", text).casefold().replace("ё", "е")


def split_words(identifier: str) -> list[str]:
    """Split an identifier at case changes, acronyms, digits and underscores.

    Returns the words as written (not folded); an identifier without inner words returns
    itself as one word; an empty string returns ``[]``.

    >>> split_words("ЗначениеРеквизитаОбъекта")
    ['Значение', 'Реквизита', 'Объекта']
    >>> split_words("ИННСоответствуетТребованиям")
    ['ИНН', 'Соответствует', 'Требованиям']
    >>> split_words("ЮТOnStart")
    ['ЮТ', 'On', 'Start']
    """
    return _SPLIT_RE.findall(identifier)
