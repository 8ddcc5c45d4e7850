"""Carry query words across languages: English query words to Russian identifier parts for
a Russian configuration, and Russian words to English ones for an English configuration.

The lexicon (``daemon/data/lexicon_1c.json``) is learned by ``tools/build_lexicon.py``
from the Russian and English editions of SSL 3.1, whose objects, fields, methods and
parameters correspond one to one; it maps index tokens to index tokens (folded, Snowball
stemmed word parts, as :mod:`daemon.text.tokenize` makes them): ``extens`` → ``расширен``,
``currenc`` → ``валют``. It is a work derived from SSL, © 1C-Soft, CC BY 4.0; the attribution
is in the file and in ``daemon/data/README.md``.

The ranker calls :func:`translated_query` only for a query written in another script than
the configuration's names (:attr:`daemon.ranking.cues.QueryCues.cross_script`): Russian
queries over Russian code are never touched.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

from .folding import fold, split_words
from .tokenize import FUNCTION_WORDS, _stem

#: The lexicon shipped with the package.
LEXICON_PATH = Path(__file__).resolve().parents[1] / "data" / "lexicon_1c.json"
#: Letters of a stem that name its morphological family (``отправ``, ``отправк``,
#: ``отправля`` are one family): chosen with the lexicon's thresholds on held-out SSL name
#: pairs (``tools/build_lexicon.py``; ``docs/internals.md``, "Cross-language lexicon").
FAMILY_PREFIX = 5

# English question and function words that the Russian list (FUNCTION_WORDS: где, когда, как,
# что, все, ...) has but its English part lacks; left out like those, so that "where" does not
# learn the "Искать" of "ГдеИскать".
_EN_FUNCTION_WORDS = frozenset(
    "where when how what who which why whose all also already still so too then there here".split()
)
_NON_WORD = re.compile(r"[^\w]+")
_LETTERS = re.compile(r"[^\W\d_]+")
#: A letter of the target script: a word of the question that has one is already written
#: the way the code is (an identifier such as ``СуммаБезНДС`` typed into an English question).
_SCRIPT = {"ru": re.compile(r"[а-яё]", re.IGNORECASE), "en": re.compile(r"[a-z]", re.IGNORECASE)}


def in_script(word: str, to: str) -> bool:
    """True when ``word`` has a letter of ``to``'s script (Cyrillic for ``"ru"``, Latin for
    ``"en"``): it needs no translation into ``to``."""
    return _SCRIPT[to].search(word) is not None


def name_word_forms(name: str, memo: dict[str, str | None] | None = None) -> list[tuple[str, str]]:
    """``(index token, folded word)`` of each word of an identifier or a synonym that
    :func:`name_words` keeps, in order: the token and the word as written, folded
    (``ПолучитьРасширениеИмениФайла`` -> ``("получ", "получить")``, ``("расширен",
    "расширение")``, ...). ``memo`` as in :func:`name_words`."""
    out = []
    for chunk in _NON_WORD.split(name):
        for part in split_words(chunk):
            if memo is not None and part in memo:
                tok = memo[part]
            else:
                w = fold(part)
                tok = None if len(w) < 2 or w.isdigit() or w in FUNCTION_WORDS or w in _EN_FUNCTION_WORDS else _stem(w)
                if memo is not None:
                    memo[part] = tok
            if tok is not None:
                out.append((tok, fold(part)))
    return out


def name_words(name: str, memo: dict[str, str | None] | None = None) -> list[str]:
    """Index-token words of an identifier or a synonym, as the lexicon speaks them: split
    into words (:func:`daemon.text.folding.split_words`, and at non-letters), folded, Snowball
    stemmed; no function words, no one-letter words, no digits. ``memo``: a dict the caller
    keeps over many names (word part -> token or None), so a bulk build folds and stems each
    distinct part once.

    >>> name_words("ПолучитьРасширениеИмениФайла")
    ['получ', 'расширен', 'имен', 'файл']
    """
    return [tok for tok, _ in name_word_forms(name, memo)]


def family(word: str) -> str:
    """The morphological family of a stem: its first :data:`FAMILY_PREFIX` letters."""
    return word[:FAMILY_PREFIX]


class Lexicon:
    """Two token maps, ``en_ru`` and ``ru_en``: token -> [(translation, share)], best first;
    ``share`` (0..1] is the translation's share of the word's links (see the build script).
    ``surface``: ``{"ru": {token: word}, "en": {token: word}}``, the folded word a
    translation token most often stands for in the names (empty in a lexicon built before
    it existed: :meth:`translate_text` then writes the tokens)."""

    __slots__ = ("en_ru", "ru_en", "attribution", "surface")

    def __init__(
        self,
        en_ru: dict[str, list[tuple[str, float]]],
        ru_en: dict[str, list[tuple[str, float]]],
        attribution: str = "",
        surface: dict[str, dict[str, str]] | None = None,
    ) -> None:
        self.en_ru = en_ru
        self.ru_en = ru_en
        self.attribution = attribution
        self.surface = surface or {"ru": {}, "en": {}}

    @classmethod
    def load(cls, path: Path = LEXICON_PATH) -> "Lexicon":
        """Read a lexicon JSON written by ``tools/build_lexicon.py``.

        Raises ``OSError`` if it cannot be read and ``ValueError`` naming the file if it is
        not such a lexicon (no ``en_ru``/``ru_en`` maps of token -> [[token, share], ...]).
        """
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            maps = []
            for key in ("en_ru", "ru_en"):
                maps.append({str(k): [(str(t), float(w)) for t, w in v] for k, v in data[key].items()})
            raw = data.get("surface") or {}
            surface = {lang: {str(k): str(v) for k, v in (raw.get(lang) or {}).items()} for lang in ("ru", "en")}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"{path}: not a lexicon file ({exc})") from exc
        return cls(maps[0], maps[1], str(data.get("attribution", "")), surface)

    def translate(self, tokens: list[str], to: str, min_share: float = 0.0) -> list[str]:
        """Translations of ``tokens`` (index tokens of a query) into ``to`` (``"ru"`` or
        ``"en"``), each once, in query order then by share; tokens without a translation give
        nothing. ``min_share`` drops translations with a smaller share. Raises ``ValueError``
        for another ``to``."""
        if to not in ("ru", "en"):
            raise ValueError(f"to must be 'ru' or 'en', got {to!r}")
        table = self.en_ru if to == "ru" else self.ru_en
        out: dict[str, None] = {}
        for tok in tokens:
            for t, share in table.get(tok, ()):
                if share >= min_share:
                    out.setdefault(t, None)
        return list(out)

    def translate_text(self, text: str, to: str) -> str:
        """``text`` (a question in the other language) as words of ``to`` for the embedder:
        each word of ``text`` in order, as its index tokens (:func:`name_words`: one, or one
        per part of a camelCase name such as ``getCurrencyRate``), each replaced by
        its best translation (the first of :meth:`translate`'s list) written as the word it
        most often stands for in the names (:attr:`surface`); a word already in ``to``'s
        script (:func:`in_script`: a name typed into the question, "how to call
        СуммаБезНДС") is kept as written; words without a translation and function words
        are left out, each word once. ``""`` when nothing is left.
        Raises ``ValueError`` for another ``to``.

        >>> default_lexicon().translate_text("get the file extension from a file name", "ru")
        'получить файла расширений имя'

        Only the best translation per word: a short text reads as one request to the embedder
        (the first three per word measured lower: ``docs/ranking.md``, ``translated_dense_weight``)."""
        if to not in ("ru", "en"):
            raise ValueError(f"to must be 'ru' or 'en', got {to!r}")
        table = self.en_ru if to == "ru" else self.ru_en
        surface = self.surface.get(to, {})
        out: dict[str, None] = {}
        for word in _LETTERS.findall(text):
            if in_script(word, to):
                out.setdefault(word, None)
                continue
            for tok in name_words(word):  # a camelCase name typed in gives each of its words
                best = table.get(tok)
                if best:
                    out.setdefault(surface.get(best[0][0], best[0][0]), None)
        return " ".join(out)


@lru_cache(maxsize=1)
def default_lexicon() -> Lexicon:
    """The shipped lexicon, read once per process."""
    return Lexicon.load()


def translated_query(query_tokens: list[str], to: str) -> list[str]:
    """The BM25 tokens of a query in the other script than the corpus: its words translated
    with :func:`default_lexicon` into ``to`` (``ru`` or ``en``: the language of the corpus's
    names), after the tokens already in that script (:func:`in_script`: a name typed into the
    question), without repeats. ``[]`` when nothing translates and nothing is kept (the ranker
    then gives the lexical channels no vote)."""
    # the tokens already in the code's script (a name typed into the question) stay
    kept = [t for t in query_tokens if in_script(t, to)]
    return list(dict.fromkeys(kept + default_lexicon().translate(query_tokens, to)))


# Latin letters as a Russian writer spells a Latin acronym in Cyrillic ("смс" for SMS, "пдф" for
# PDF, "фтп" for FTP): consonants only, one Latin letter (or two) each.
_ACRONYM_LATIN = {
    "б": "b", "в": "v", "г": "g", "д": "d", "ж": "zh", "з": "z", "й": "j", "к": "k", "л": "l", "м": "m",
    "н": "n", "п": "p", "р": "r", "с": "s", "т": "t", "ф": "f", "х": "x", "ц": "c", "ч": "ch", "ш": "sh",
}  # fmt: skip


def latin_acronym(word: str) -> str | None:
    """The Latin spelling of a Latin acronym written in Cyrillic letters: a folded word of 2 to
    5 Cyrillic consonants (``смс`` -> ``sms``, ``пдф`` -> ``pdf``); None for any other word
    (a word with a vowel is a word, not a spelled-out acronym)."""
    if not 2 <= len(word) <= 5:
        return None
    out = []
    for ch in word:
        lat = _ACRONYM_LATIN.get(ch)
        if lat is None:
            return None
        out.append(lat)
    return "".join(out)
