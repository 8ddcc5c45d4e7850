"""A 1C-aware tokenizer for the BM25 channel: BSL code, doc comments, query texts inside
string literals, metadata names and synonyms, and the user's queries.

Rules (documents and queries alike, except where noted):

* **Raw units.** The text is scanned for *compounds*: runs of word characters (``\\w``:
  Cyrillic, Latin, digits, ``_``) joined by ``.`` or ``-`` (``ОбщегоНазначения.ЗначениеРеквизитаОбъекта``,
  ``НФ-001``, ``Справочник.Пользователи.ПустаяСсылка``). Everything else separates tokens, so the
  words of string literals (``"ВЫБРАТЬ … |ИЗ Справочник.Пользователи"``) and of ``//``
  comments are tokenized exactly like code.
* **Identifiers.** Every word gives its whole folded form (``значениереквизитаобъекта``) and,
  when it has inner words, its CamelCase / acronym / digit / ``_`` parts from
  :func:`daemon.text.folding.split_words` (``значение``, ``реквизита``, ``объекта``). Folding is
  :func:`daemon.text.folding.fold` (NFC, ``ё``→``е``, casefold), so case and ``ё`` never matter.
* **Dotted names.** Each dotted segment is tokenized as above, and every pair of *adjacent*
  identifier segments also gives a pair token ``модуль.метод`` (``Справочник.Пользователи.ПустаяСсылка``
  gives ``справочник.пользователи`` and ``пользователи.пустаяссылка``). Pairs rather than the
  whole chain, because queries name two levels (``Модуль.Метод``, ``Справочник.Имя``) while
  code writes longer chains; a 2-segment name's pair is the whole name. Segments that start
  with a digit (``3.1.12``) give no pair.
* **Codes.** A hyphenated segment is kept whole plus its parts (``НФ-001`` → ``нф-001``,
  ``нф``, ``001``). In documents only when it has no lowercase letter (``UTF-8``,
  ``ISO-8859-1``, ``НФ-001``), because code writes subtractions without spaces
  (``Количество-1``) and those would only bloat the vocabulary; in queries always (a lowercase
  ``нф-001`` must still meet the document's ``нф-001``; an unknown query token costs nothing).
* **Short tokens.** One-letter tokens are dropped (loop variables, the ``В`` of
  ``ВыгрузитьВExcel``, table aliases ``Т.Ссылка``): they carry no meaning and are frequent.
  Digits are kept, also single digits (``ОтправитьSMS2``, ``1С``).
* **Stopwords** (``stopwords=True``; off by default): :data:`KEYWORDS` (BSL statements,
  literals, directives, ru + en) are dropped as whole words only (``КонецЕсли`` gives nothing,
  but ``ВозвратТоваров`` keeps ``возврат``), :data:`FUNCTION_WORDS` (prepositions, conjunctions,
  pronouns) as whole words and as parts (``ЗначениеИзСтроки`` gives ``значениеизстроки``,
  ``значение``, ``строки``). Off by default: dropping them made BM25 rank slightly *worse*
  (the keywords mostly lengthen code-heavy methods, and dropping them shifts BM25's length
  normalisation towards those).
* **Stemming** (``stem=True``): the Snowball Russian (Cyrillic words) or English (Latin words)
  stemmer from PyStemmer is applied to the *word parts*, never to whole identifiers or pair
  tokens: ``Пользователи`` gives ``пользователи`` and ``пользовател``,
  ``ОтправитьПисьмо`` gives ``отправитьписьмо``, ``отправ``, ``письм``. Index and query
  must use the same ``stem`` value.

Document and query tokenization differ in two ways only: :func:`tokenize_query` keeps every
hyphenated code whole (see Codes) and returns each token once, in first-occurrence order
(a repeated query word should not count twice); :func:`tokenize` keeps repeats, since term
frequency matters for BM25.

Speed: expansion of one raw compound is cached (a dict whose ``__missing__`` expands, so a
known compound costs no Python call and the token list is concatenated in C); identifiers
repeat so much that most compounds are cache hits. The caches are plain dicts of at most
:data:`_CACHE_MAX` entries each, dropped when full. The measurements behind these rules and
the tokenizer's speed: ``docs/internals.md``, "Tokenizer".
"""

from __future__ import annotations

import re
from functools import lru_cache
from itertools import chain
from sys import intern

import Stemmer

from daemon.text.folding import fold, split_words

__all__ = [
    "FUNCTION_WORDS",
    "KEYWORDS",
    "STOPWORDS",
    "TOKENIZER_VERSION",
    "clear_caches",
    "stem_word",
    "tokenize",
    "tokenize_query",
]

#: Bumped whenever a rule changes the tokens of some text; persisted indexes built with another
#: version must be rebuilt (the engine stores it in its manifest).
TOKENIZER_VERSION = 1

#: A compound: words joined by "." or "-" (no spaces). ``\w`` covers Cyrillic, Latin,
#: digits and "_" (``re`` is Unicode-aware for ``str`` patterns).
_COMPOUND_RE = re.compile(r"\w+(?:[.\-]\w+)*")
_CYRILLIC_RE = re.compile(r"[а-яё]")
_LATIN_RE = re.compile(r"[a-z]")

# BSL statements, operators, literals and preprocessor / compilation directives, in Russian
# and English (1C:Enterprise 8.3 language reference), folded. Dropped only as *whole words*:
# as parts of identifiers they are ordinary content words (``ВозвратТоваров``,
# ``ЦиклОбмена``, ``НовыйЭлемент``), and the words that also name things in SSL
# (``Область`` of ``ОбластьДанных``, ``Удаление``, ``Выполнить``, ``Перед``/``После`` of
# event handlers) are not listed at all.
_BSL_KEYWORDS = """
если тогда иначеесли иначе конецесли для каждого из по пока цикл конеццикла процедура
конецпроцедуры функция конецфункции перем возврат продолжить прервать и или не попытка
исключение конецпопытки вызватьисключение новый истина ложь неопределено null экспорт знач
асинх ждать конецобласти насервере наклиенте насерверебезконтекста наклиентенасервере
наклиентенасерверебезконтекста
if then elsif else endif for each in to while do enddo procedure endprocedure function
endfunction var return continue break and or not try except endtry raise new true false
undefined export val async await endregion atserver atclient atservernocontext
atclientatserver atclientatservernocontext
"""

# Function words that carry no topic in doc comments and natural-language queries
# (a short hand-picked subset of the Snowball Russian / English stopword lists: prepositions,
# conjunctions, particles, pronouns). Dropped as whole words and as identifier parts (the
# ``В`` of ``ЗаписатьСобытияВЖурнал``). Content verbs (``есть``, ``можно``) are kept.
_FUNCTION_WORDS = """
в во на с со к ко у о об от до за под над про при без через из для по и или не а но да же ли бы то это этот
эта эти этого этой этом тот та те того как что чтобы где когда куда кто чем так также
тоже уже еще его ее их им ими он она оно они мы вы я ты все всех весь вся
the a an of to in on at by for with from into is are was were be been it its this that
these those as and or if not no
"""

#: Folded BSL keywords dropped as whole words when ``stopwords=True``.
KEYWORDS: frozenset[str] = frozenset(fold(w) for w in _BSL_KEYWORDS.split())
#: Folded function words dropped as whole words and as identifier parts when ``stopwords=True``.
FUNCTION_WORDS: frozenset[str] = frozenset(fold(w) for w in _FUNCTION_WORDS.split())
#: Everything :func:`tokenize` may drop as a whole word.
STOPWORDS: frozenset[str] = KEYWORDS | FUNCTION_WORDS

_STEMMERS = {"ru": Stemmer.Stemmer("russian"), "en": Stemmer.Stemmer("english")}


@lru_cache(maxsize=1 << 16)
def _stem(word: str) -> str:
    """Stem one folded word part: Russian stemmer for Cyrillic, English for Latin, else as is."""
    if _CYRILLIC_RE.search(word):
        if _LATIN_RE.search(word):
            return word  # mixed script (a typo or a brand name): leave it
        return _STEMMERS["ru"].stemWord(word)
    if _LATIN_RE.search(word):
        return _STEMMERS["en"].stemWord(word)
    return word


def stem_word(word: str) -> str:
    """The stem BM25 indexes for one folded word part (:func:`_stem`: Snowball Russian for
    Cyrillic, English for Latin, a mixed-script word as is)."""
    return _stem(word)


def _keep(token: str, stopwords: bool, whole: bool) -> bool:
    if len(token) == 1 and not token.isdigit():
        return False
    return not (stopwords and token in (STOPWORDS if whole else FUNCTION_WORDS))


#: Entries per expansion cache before it is dropped and refilled (see :func:`clear_caches`).
_CACHE_MAX = 1 << 18
# (stem, stopwords) -> word -> tokens;  (stem, stopwords, query) -> compound -> tokens
_word_caches: dict[tuple[bool, bool], dict[str, tuple[str, ...]]] = {}
_compound_caches: dict[tuple[bool, bool, bool], "_CompoundCache"] = {}


def clear_caches() -> None:
    """Drop the expansion caches (tens of MB after tokenizing a large configuration; each
    cache is also dropped by itself when it exceeds :data:`_CACHE_MAX` entries). Call after a
    bulk index build;
    later incremental updates refill only what they need."""
    _word_caches.clear()
    _compound_caches.clear()


def _word(word: str, stem: bool, stopwords: bool) -> tuple[str, ...]:
    """Tokens of one ``\\w+`` word: whole folded form, then its (stemmed) parts. Cached."""
    cache = _word_caches.setdefault((stem, stopwords), {})
    out_t = cache.get(word)
    if out_t is not None:
        return out_t
    whole = intern(fold(word))
    out: list[str] = []
    if _keep(whole, stopwords, True):
        out.append(whole)
        parts = split_words(word)
        if len(parts) > 1:
            for part in parts:
                p = fold(part)
                if _keep(p, stopwords, False):
                    out.append(intern(_stem(p) if stem else p))
        elif stem:
            st = _stem(whole)
            if st != whole and len(st) > 1:
                out.append(intern(st))
    if len(cache) >= _CACHE_MAX:
        cache.clear()
    out_t = cache[word] = tuple(out)
    return out_t


def _expand(compound: str, stem: bool, stopwords: bool, query: bool) -> tuple[str, ...]:
    """All tokens of one raw compound (not cached here; see :func:`_tokens`)."""
    if "." not in compound and "-" not in compound:
        return _word(compound, stem, stopwords)
    out: list[str] = []
    segments = compound.split(".")
    for seg in segments:
        if "-" in seg:
            if query or not any(c.islower() for c in seg):
                out.append(intern(fold(seg)))
            for piece in seg.split("-"):
                out.extend(_word(piece, stem, stopwords))
        else:
            out.extend(_word(seg, stem, stopwords))
    for left, right in zip(segments, segments[1:], strict=False):
        if (
            "-" not in left
            and "-" not in right
            and len(left) > 1
            and len(right) > 1
            and not left[0].isdigit()
            and not right[0].isdigit()
        ):
            out.append(intern(f"{fold(left)}.{fold(right)}"))
    return tuple(out)


class _CompoundCache(dict):
    """compound -> tokens; a miss expands the compound (``__missing__``), so a lookup of a
    known compound never leaves C."""

    __slots__ = ("query", "stem", "stopwords")

    def __init__(self, stem: bool, stopwords: bool, query: bool) -> None:
        super().__init__()
        self.stem, self.stopwords, self.query = stem, stopwords, query

    def __missing__(self, compound: str) -> tuple[str, ...]:
        if len(self) >= _CACHE_MAX:
            self.clear()
        toks = self[compound] = _expand(compound, self.stem, self.stopwords, self.query)
        return toks


def _tokens(text: str, stem: bool, stopwords: bool, query: bool) -> list[str]:
    """Concatenated expansions of all compounds of ``text``, through the compound cache.

    No per-token Python work: the concatenation runs in C (``chain`` over ``map`` of the
    cache lookup), and only a compound missing from the cache calls back into Python."""
    cache = _compound_caches.get((stem, stopwords, query))
    if cache is None:
        cache = _compound_caches[(stem, stopwords, query)] = _CompoundCache(stem, stopwords, query)
    return list(chain.from_iterable(map(cache.__getitem__, _COMPOUND_RE.findall(text))))


def tokenize(text: str, *, stem: bool = False, stopwords: bool = False) -> list[str]:
    """Tokens of a document (a method text, a metadata description) for the BM25 index.

    Returns folded tokens in text order with repeats (term frequency counts); see the module
    docstring for the rules. ``stem`` and ``stopwords`` must match the values the query side
    uses. Never raises on any ``str`` input; an empty or token-free text gives ``[]``.

    >>> tokenize("Результат = ОбщегоНазначения.ЗначениеРеквизитаОбъекта(Ссылка);")
    ... # doctest: +NORMALIZE_WHITESPACE
    ['результат', 'общегоназначения', 'общего', 'назначения', 'значениереквизитаобъекта',
     'значение', 'реквизита', 'объекта', 'общегоназначения.значениереквизитаобъекта', 'ссылка']
    """
    return _tokens(text, stem, stopwords, False)


def tokenize_query(text: str, *, stem: bool = False, stopwords: bool = False) -> list[str]:
    """Tokens of a user query: the document rules, each token once in first-occurrence order.

    Differences from :func:`tokenize`: hyphenated codes are always kept whole (``нф-001``),
    and duplicates are removed. A query with no word characters, or with ``stopwords=True``
    only stopwords (``"Если"``), gives ``[]``; callers treat that as "no lexical evidence".

    >>> tokenize_query("ЗнРекОб для Справочник.Пользователи, для НФ-001")
    ... # doctest: +NORMALIZE_WHITESPACE
    ['знрекоб', 'зн', 'рек', 'об', 'для', 'справочник', 'пользователи', 'справочник.пользователи',
     'нф-001', 'нф', '001']
    """
    return list(dict.fromkeys(_tokens(text, stem, stopwords, True)))
