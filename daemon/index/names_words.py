"""How the names channel cuts names and queries into words (:mod:`daemon.index.names`).

A query is a name when it is one identifier, optionally dotted (:func:`is_identifier_query`); its
*humps* split before each capital letter and digit run (:func:`humps`); a name's words are split
the same way or by :func:`daemon.text.folding.split_words` (:func:`word_splits`), kept as
``\\x00``-joined *signatures* and their *initials*, which the CamelHump matchers
(:func:`hump_matcher`) read. Shared by the upkeep of the entries and the matching of a query.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from operator import itemgetter

from daemon.text.folding import fold, split_words

#: An acronym query: 2 to 8 capital letters (``НДС``, ``ИНН``, ``XML``, ``ФИАС``).
ACRONYM_RE = re.compile(r"[A-ZА-ЯЁ]{2,8}")

_UPPER = "A-ZА-ЯЁ"
# Humps: a capital followed by non-capital letters, a run of non-capital letters (a lowercase
# start), or a digit run. "_" and other non-word characters separate.
_HUMP_RE = re.compile(rf"[{_UPPER}][^\W\d_{_UPPER}]*|[^\W\d_{_UPPER}]+|\d+")
_IDENT_RE = re.compile(r"[^\W\d]\w*(?:\.[^\W\d]\w*)*\.?")


def is_acronym(query: str) -> bool:
    """True for a query of 2 to 8 capital letters and nothing else (``НДС``, ``ФИАС``): it is
    first a word of names and texts, then a CamelHump abbreviation."""
    return ACRONYM_RE.fullmatch(query.strip()) is not None


def humps(text: str) -> list[str]:
    """Split at every capital letter and digit run, folded: ``"ЗнРекОб"`` →
    ``["зн", "рек", "об"]``, ``"ГСП"`` → ``["г", "с", "п"]``, ``"ОтправитьSMS"`` →
    ``["отправить", "s", "m", "s"]``; ``"знрекоб"`` → ``["знрекоб"]``."""
    return [fold(h) for h in _HUMP_RE.findall(text)]


class _FoldCache(dict):
    """word -> fold(word); words repeat across names (``Получить``, ``Объекта`` ...), and a
    hit stays in C (``map`` over ``__getitem__``). Dropped when it exceeds 65,536 words."""

    def __missing__(self, word: str) -> str:
        if len(self) >= 1 << 16:
            self.clear()
        f = self[word] = fold(word)
        return f


_FOLDED = _FoldCache()
_first = itemgetter(slice(0, 1))


def word_splits(name: str) -> tuple[tuple[str, ...], ...]:
    """The name's word sequences for CamelHump matching (one or two distinct splittings)."""
    a = tuple(map(_FOLDED.__getitem__, _HUMP_RE.findall(name)))
    b = tuple(map(_FOLDED.__getitem__, split_words(name)))
    return (a,) if a == b or not b else (a, b)


def initials(words: tuple[str, ...]) -> str:
    """The first letters of ``words`` (``("зн", "рек")`` → ``"зр"``)."""
    return "".join(map(_first, words))


def signature(words: tuple[str, ...]) -> str:
    """The words joined by ``\\x00``: what the CamelHump matchers read."""
    return "\x00".join(words)


def clean_query(query: str) -> str:
    """``query`` without surrounding whitespace and a trailing ``()`` or ``(``."""
    q = query.strip()
    if q.endswith("()"):
        q = q[:-2].rstrip()
    elif q.endswith("("):
        q = q[:-1].rstrip()
    return q


def is_identifier_query(query: str) -> bool:
    """True when ``query`` looks like a name rather than natural language.

    A name is one token of letters, digits and ``_`` that does not start with a digit,
    optionally dotted (``Модуль.Метод``, ``Справочник.Пользователи``, also with an empty or
    incomplete last part: ``ОбщегоНазначения.``), optionally followed by ``()``; surrounding
    whitespace is ignored. Anything with inner whitespace (``отправить письмо``), other
    punctuation (``НФ-001``, ``a+b``) or a leading digit (``1С``) is not.

    >>> is_identifier_query("ЗнРекОб"), is_identifier_query(" ОбщегоНазначения.ЗначениеРекв ")
    (True, True)
    >>> is_identifier_query("как отправить письмо"), is_identifier_query("")
    (False, False)
    """
    return _IDENT_RE.fullmatch(clean_query(query)) is not None


def hump_regex(q_humps: list[str]) -> re.Pattern[str]:
    """Matches a word signature whose word *i* starts with hump *i*, from the first word on."""
    body = "[^\x00]*\x00".join(re.escape(h) for h in q_humps)
    return re.compile(body)


def hump_matcher(q_humps: list[str], n_candidates: int) -> Callable[[str], bool]:
    """A predicate on word signatures: a compiled regex for many candidates, a plain
    ``startswith`` loop for a few (compiling the regex costs more than checking a few names)."""
    if n_candidates > 64:
        rx = hump_regex(q_humps).match
        return lambda sig: rx(sig) is not None
    n = len(q_humps)

    def check(sig: str) -> bool:
        words = sig.split("\x00", n)
        return len(words) >= n and all(words[i].startswith(h) for i, h in enumerate(q_humps))

    return check
