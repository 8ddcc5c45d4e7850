"""Learn a Russian <-> English lexicon of 1C identifier words from the two SSL editions.

Usage (writes ``daemon/data/lexicon_1c.json``)::

    python tools/build_lexicon.py ../shared/corpora/ssl31-ru ../shared/corpora/ssl31-en \
        [--out daemon/data/lexicon_1c.json] [--check]

The Russian SSL 3.1 (3.1.12.238) and its World edition (3.1.12.175) are the same library
translated: every metadata object and every child object (attribute, tabular section,
dimension, resource, enum value, form, command, template) keeps its ``uuid``, and a
module's methods appear in the same order. So the script

1. pairs names: objects and child objects by ``uuid`` (``Name`` with ``Name``, and the
   ``ru`` synonym with the ``en`` synonym); then, for each module of a paired owner (same
   sub-path under the owner's folder, forms through their descriptors' uuids), the method
   declarations in order (``difflib`` over the sequence of (kind, parameter count), so a
   method added in one edition does not shift the rest; only equal (kind, count) runs are
   paired), and the parameters of each paired method by position;
2. splits each name into words exactly as the BM25 tokenizer does (:func:`daemon.text.lexicon.name_words`:
   split, folded, Snowball stem of each part; synonyms split on non-letters), so that the
   lexicon speaks in index tokens;
3. aligns the word sequences by competitive linking (Melamed 2000): score every (en, ru)
   word pair by its Dice coefficient over all name pairs, then inside each name pair link the
   best-scoring words one to one, greedily; word order does not matter (Russian genitive
   chains run the other way: ``ПолучитьРасширениеИмениФайла`` / ``GetFileNameExtension``);
4. keeps a link (en, ru) when it was made at least :data:`MIN_LINKS` times and makes up at
   least :data:`MIN_SHARE` of the links of *both* words, at most :data:`MAX_TRANSLATIONS` per
   word, weighted by its share.

How the thresholds were chosen: not on the gold set. ``--check`` holds out every 10th name
pair (by position), learns the lexicon from the rest and reports, over the held-out pairs,
the precision (share of proposed Russian words that occur in the Russian name) and recall
(share of the Russian name's words proposed by some English word). On the 62,292 name pairs
(6,229 held out), MIN_SHARE is the lever: 0.05 / 0.1 / 0.2 / 0.3 gave precision 0.53 / 0.58 /
0.69 / 0.75 at recall 0.92 / 0.90 / 0.85 / 0.81 (MIN_LINKS 2); 0.2 is the knee. MIN_LINKS
1 / 2 / 3 / 5 moved precision and recall by under 0.01 but cut the vocabulary (1,373 / 1,125
/ 965 / 799 English words at MIN_SHARE 0.2): 2 drops the single links (mostly one name's
accident) and keeps the words seen in two names. MAX_TRANSLATIONS 3: at most five
translations can have a share of 0.2 (shares sum to 1 per word); three keeps the expanded
query short (14 of the 1,151 English words reach the cap). Function words (:data:`daemon.text.tokenize.FUNCTION_WORDS`
and a few English question words) and one-letter words are left out on both sides. Russian
stems are grouped into families (:func:`daemon.text.lexicon.family`, the first
:data:`daemon.text.lexicon.FAMILY_PREFIX` letters) for the share threshold, and every form of a
kept family (with MIN_LINKS links) is listed. (Also joining a stem to a shorter translation
that is its prefix, ``им``/``имен`` of "name", measured worse on the dev crosslingual
queries, 0.304 / 0.486 -> 0.294 / 0.463, and is not done.)

Output: JSON ``{"attribution", "source", "thresholds", "en_ru": {en: [[ru, weight], ...]},
"ru_en": {ru: [[en, weight], ...]}, "surface": {"ru": {token: word}, "en": {token: word}}}``
(``surface``: the folded word each translation token most often stands for in the names,
:func:`surface_forms`), sorted, so a rebuild from the same corpora is
byte-identical. The lexicon is a work derived from SSL (CC BY 4.0, © 1C-Soft); its
attribution travels inside the file and in ``daemon/data/README.md``.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

from lxml import etree

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from daemon.text.lexicon import family  # noqa: E402
from daemon.text.lexicon import name_word_forms  # noqa: E402
from daemon.text.lexicon import name_words as words  # noqa: E402

MIN_LINKS = 2
MIN_SHARE = 0.2
MAX_TRANSLATIONS = 3

ATTRIBUTION = (
    "Word pairs derived from 1C:Standard Subsystems Library 3.1 (1С:Библиотека стандартных подсистем), "
    "Russian edition 3.1.12.238 (github.com/1c-syntax/ssl_3_1 @ 2572466ea7fb0f1c5693c0a13690ceb81aad699c) and "
    "World edition 3.1.12.175 (github.com/1c-syntax/ssl_3_1_eng @ 5c8e0a862f547dea67862e84df71dbf2ff133488), "
    "© 1C-Soft LLC (ООО «1С-Софт»), licensed under Creative Commons Attribution 4.0 International "
    "(CC BY 4.0, https://creativecommons.org/licenses/by/4.0/). Changes: no file of the library is included; only "
    "pairs of identifier words computed statistically from its object, field, method and parameter names and "
    "synonyms (tools/build_lexicon.py). Provided as is, without warranties."
)

_METHOD_RE = re.compile(
    r"^[ \t]*(?:(?:Асинх|Async)[ \t]+)?(Процедура|Функция|Procedure|Function)[ \t]+(\w+)[ \t]*\(([^)]*)",
    re.IGNORECASE | re.MULTILINE,
)
_KIND = {"процедура": "p", "procedure": "p", "функция": "f", "function": "f"}
_V8 = "{http://v8.1c.ru/8.1/data/core}"
_MD = "{http://v8.1c.ru/8.3/MDClasses}"


def _descriptors(root: Path) -> dict[str, tuple[str, str, str]]:
    """uuid -> (relative descriptor path, Name, synonym) for every element with a uuid and a
    Properties/Name in every .xml descriptor outside Ext/ folders."""
    out: dict[str, tuple[str, str, str]] = {}
    parser = etree.XMLParser(resolve_entities=False, huge_tree=True)
    for path in sorted(root.rglob("*.xml")):
        rel = path.relative_to(root).as_posix()
        if "/Ext/" in rel:
            continue
        try:
            doc = etree.parse(str(path), parser)
        except etree.XMLSyntaxError:
            continue
        for el in doc.iter():
            uuid = el.get("uuid") if isinstance(el.tag, str) else None
            if not uuid:
                continue
            name = el.find(f"{_MD}Properties/{_MD}Name")
            if name is None or not (name.text or "").strip():
                continue
            syn = ""
            for item in el.findall(f"{_MD}Properties/{_MD}Synonym/{_V8}item"):
                syn = item.findtext(f"{_V8}content") or syn
            out[uuid] = (rel, name.text.strip(), syn.strip())
    return out


def _methods(path: Path) -> list[tuple[str, str, list[str]]]:
    """(kind p|f, name, parameter names) of every method declaration, in file order."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return []
    out = []
    for m in _METHOD_RE.finditer(text):
        params = []
        for p in m.group(3).split(","):
            p = re.sub(r"^\s*(?:Знач|Val)\s+", "", p.strip(), flags=re.IGNORECASE).split("=")[0].strip()
            if p:
                params.append(p)
        out.append((_KIND[m.group(1).lower()], m.group(2), params))
    return out


def name_pairs(ru_root: Path, en_root: Path) -> list[tuple[str, str]]:
    """All (en name, ru name) pairs: objects, child objects, synonyms, methods, parameters."""
    ru, en = _descriptors(ru_root), _descriptors(en_root)
    pairs: list[tuple[str, str]] = []
    module_dirs: list[tuple[Path, Path]] = []
    for uuid in sorted(ru.keys() & en.keys()):
        (rrel, rname, rsyn), (erel, ename, esyn) = ru[uuid], en[uuid]
        pairs.append((ename, rname))
        if rsyn and esyn:
            pairs.append((esyn, rsyn))
        if rrel.endswith(".xml") and erel.endswith(".xml") and Path(rrel).stem == rname:
            module_dirs.append((ru_root / rrel[:-4], en_root / erel[:-4]))
    for rdir, edir in module_dirs:
        for sub in (
            "Ext/Module.bsl",
            "Ext/ObjectModule.bsl",
            "Ext/ManagerModule.bsl",
            "Ext/RecordSetModule.bsl",
            "Ext/ValueManagerModule.bsl",
            "Ext/Form/Module.bsl",
            "Ext/CommandModule.bsl",
        ):
            rm, em = _methods(rdir / sub), _methods(edir / sub)
            if not rm or not em:
                continue
            sm = difflib.SequenceMatcher(
                a=[(k, len(p)) for k, _, p in rm], b=[(k, len(p)) for k, _, p in em], autojunk=False
            )
            for block in sm.get_matching_blocks():
                for i in range(block.size):
                    (_, rn, rp), (_, en_, ep) = rm[block.a + i], em[block.b + i]
                    pairs.append((en_, rn))
                    pairs.extend(zip(ep, rp, strict=False))
    return pairs


def learn(pairs: list[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """Competitive linking over the word sequences of ``pairs``: link counts per (en, ru)."""
    seqs = []
    for e, r in pairs:
        ew, rw = set(words(e)), set(words(r))
        if ew and rw and ew != rw:  # identical words: an untranslated name, nothing to learn
            seqs.append((ew, rw))
        elif ew and rw:
            seqs.append((ew, rw))
    ce: Counter = Counter()
    cr: Counter = Counter()
    co: Counter = Counter()
    for ew, rw in seqs:
        ce.update(ew)
        cr.update(rw)
        co.update((e, r) for e in ew for r in rw)
    links: Counter = Counter()
    for ew, rw in seqs:
        cand = sorted(((2 * co[e, r] / (ce[e] + cr[r]), e, r) for e in ew for r in rw), reverse=True)
        used_e: set[str] = set()
        used_r: set[str] = set()
        for _, e, r in cand:
            if e in used_e or r in used_r:
                continue
            used_e.add(e)
            used_r.add(r)
            links[e, r] += 1
    return links


def _one_way(
    links: dict[tuple[str, str], int], src: int, min_links: int, min_share: float, max_translations: int
) -> dict:
    """source word -> [(target word, family share)] for one direction (src 0: en -> ru)."""
    by_src: dict[str, Counter] = defaultdict(Counter)
    for pair, n in links.items():
        by_src[pair[src]][pair[1 - src]] += n
    out = {}
    for w, targets in by_src.items():
        total = sum(targets.values())
        fams: Counter = Counter()
        for t, n in targets.items():
            fams[family(t)] += n
        kept = [f for f, n in sorted(fams.items(), key=lambda x: (-x[1], x[0])) if n / total >= min_share][
            :max_translations
        ]
        trans = [
            (t, round(fams[family(t)] / total, 3)) for t, n in targets.items() if n >= min_links and family(t) in kept
        ]
        if trans:
            out[w] = sorted(trans, key=lambda x: (-x[1], -targets[x[0]], x[0]))
    return dict(sorted(out.items()))


def lexicon(
    links: dict[tuple[str, str], int],
    min_links: int = MIN_LINKS,
    min_share: float = MIN_SHARE,
    max_translations: int = MAX_TRANSLATIONS,
) -> tuple[dict, dict]:
    """(en -> [(ru, share)], ru -> [(en, share)]) from link counts (see module docstring)."""
    return (
        _one_way(links, 0, min_links, min_share, max_translations),
        _one_way(links, 1, min_links, min_share, max_translations),
    )


def surface_forms(pairs: list[tuple[str, str]], en_ru: dict, ru_en: dict) -> dict[str, dict[str, str]]:
    """``{"ru": {token: word}, "en": {token: word}}``: for every token that is a translation
    in the lexicon, the folded word it most often stands for in the names (``расширен`` ->
    ``расширение``; ties by the word), so a translated query can be written as words for the
    embedder (:meth:`daemon.text.lexicon.Lexicon.translate_text`)."""
    want = {"ru": {t for v in en_ru.values() for t, _ in v}, "en": {t for v in ru_en.values() for t, _ in v}}
    counts: dict[str, dict[str, Counter]] = {"ru": defaultdict(Counter), "en": defaultdict(Counter)}
    memo: dict = {}
    for e, r in pairs:
        for lang, name in (("en", e), ("ru", r)):
            for tok, word in name_word_forms(name, memo):
                if tok in want[lang]:
                    counts[lang][tok][word] += 1
    return {
        lang: {tok: min(c.items(), key=lambda x: (-x[1], x[0]))[0] for tok, c in sorted(counts[lang].items())}
        for lang in ("ru", "en")
    }


def check(pairs: list[tuple[str, str]]) -> None:
    """Held-out precision / recall of the translation of name words for a grid of thresholds."""
    train = [p for i, p in enumerate(pairs) if i % 10]
    test = [p for i, p in enumerate(pairs) if not i % 10]
    links = learn(train)
    for min_links in (1, 2, 3, 5):
        for min_share in (0.05, 0.1, 0.2, 0.3):
            en_ru, _ = lexicon(links, min_links, min_share)
            prop = hit = want = got = 0
            for e, r in test:
                ew, rw = set(words(e)), set(words(r))
                if not ew or not rw or ew == rw:
                    continue
                proposed = {family(t) for w in ew for t, _ in en_ru.get(w, ())}
                rf = {family(w) for w in rw}
                prop += len(proposed)
                hit += len(proposed & rf)
                want += len(rf)
                got += len(rf & proposed)
            print(
                f"min_links {min_links} min_share {min_share:.2f}: precision {hit / max(prop, 1):.3f} "
                f"recall {got / max(want, 1):.3f} ({len(en_ru)} en words)"
            )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ru", type=Path)
    ap.add_argument("en", type=Path)
    ap.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parent.parent / "daemon" / "data" / "lexicon_1c.json"
    )
    ap.add_argument(
        "--check", action="store_true", help="print held-out precision/recall for a grid of thresholds; write nothing"
    )
    a = ap.parse_args(argv)
    pairs = name_pairs(a.ru, a.en)
    print(f"{len(pairs)} name pairs", file=sys.stderr)
    if a.check:
        check(pairs)
        return 0
    en_ru, ru_en = lexicon(learn(pairs))
    out = {
        "attribution": ATTRIBUTION,
        "license": "CC-BY-4.0",
        "source": {
            "ru": "ssl31-ru (SSL 3.1.12.238)",
            "en": "ssl31-en (SSL World edition 3.1.12.175)",
            "name_pairs": len(pairs),
        },
        "thresholds": {"min_links": MIN_LINKS, "min_share": MIN_SHARE, "max_translations": MAX_TRANSLATIONS},
        "en_ru": en_ru,
        "ru_en": ru_en,
        "surface": surface_forms(pairs, en_ru, ru_en),
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, ensure_ascii=False, indent=0, sort_keys=False) + "\n", encoding="utf-8")
    print(f"wrote {a.out}: {len(en_ru)} English and {len(ru_en)} Russian words", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
