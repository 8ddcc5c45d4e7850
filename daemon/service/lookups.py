"""Read-only lookups over one root's engine: a chunk, a method, a module's lines, a metadata
object, a module's symbols, docs pages and the methods they mention.

:class:`Lookups` needs no threads and holds no state but a cache of the doc links, so the
server's commands call it directly and tests can build one over any engine. Paths given by a
caller are confined to the root (``ValueError`` otherwise); what is not indexed or not on disk
is a ``LookupError`` whose message says what was looked for.
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

import msgspec

from ..contract import (
    CODE_KINDS,
    METHOD_KINDS,
    Chunk,
    Field,
    Filters,
    MethodInfo,
    ModuleText,
    ObjectDescription,
    normalize_object_type,
    shown,
)
from ..engine import Engine
from ..sources.files import SkipFile, decode_bytes, read_regular_bytes

#: read_module returns at most this many lines per call.
MAX_READ_LINES = 2000
#: :meth:`Lookups.translated_objects`: a score from here up is a guess (a shortened or unmatched
#: word), offered as a suggestion, never taken for the object asked for.
GUESS = 1000
#: A reference's ``context`` (its source line) is cut to this many characters.
CONTEXT_CHARS = 160

_FIELD_GROUPS = {
    "attribute": "attributes",
    "addressing_attribute": "attributes",
    "tabular_section": "tabular_sections",
    "dimension": "dimensions",
    "resource": "resources",
    "enum_value": "enum_values",
    "form": "forms",
    "command": "commands",
    "template": "templates",
}


class Lookups:
    """The read-only questions about one root (see the module docstring).

    ``engine``: the root's :class:`Engine` (its public methods take its lock);
    ``max_file_bytes``: the largest file read from disk (the engine's ``max_file_bytes``).
    """

    def __init__(self, engine: Engine, *, max_file_bytes: int) -> None:
        self.engine = engine
        self.root = Path(engine.root)
        self.max_file_bytes = max_file_bytes
        self._doc_links_cache: tuple[tuple[int, int], object] | None = None

    # ------------------------------------------------------------------ chunks and methods
    def get_chunk(self, chunk_id: str) -> Chunk:
        """The chunk with this id; ``LookupError`` if there is none."""
        c = self.engine.get_chunk(chunk_id)
        if c is None:
            raise LookupError(f"no chunk with id {chunk_id!r}")
        return c

    def get_method(self, name: str, path: str | None = None) -> MethodInfo:
        """A method by ``path`` + ``name``, or by a qualified ``Модуль.Метод`` name (case- and
        ``ё``-insensitive). With several candidates the names channel's order decides (exported
        API first). A long method split into parts comes back whole. ``LookupError`` if nothing
        matches."""
        name = name.strip()
        if path is not None:
            first, parts = self._method_in(self.confine(path), name)
        else:
            first, parts = self._method_by_name(name)
        # one method = its part 0, or parts 1..n of a long one; a twin (#Если) is another method
        base = first.id.split("#", 1)[0]
        group = sorted((c for c in parts if c.id.split("#", 1)[0] == base), key=lambda c: c.start_line)
        text = group[0].text if len(group) == 1 else self._lines(group[0].path, group[0].start_line, group[-1].end_line)
        docs, docs_total = self._doc_refs_counted([first.id, base])
        return MethodInfo(
            id=base,
            path=first.path,
            name=first.name,
            kind=first.kind,
            owner=first.owner,
            module_kind=first.module_kind,
            export=first.export,
            is_async=first.is_async,
            params=first.params,
            directives=list(first.directives),
            annotations=list(first.annotations),
            region=list(first.region),
            doc=first.doc,
            signature=first.signature,
            start_line=group[0].start_line,
            end_line=group[-1].end_line,
            text=text,
            docs=docs,
            docs_total=docs_total,
        )

    def _method_in(self, rel: str, name: str) -> tuple[Chunk, list[Chunk]]:
        """(the first part, every chunk of that name) of a method in one module."""
        from ..text.folding import fold

        short = name.rsplit(".", 1)[-1]
        parts = self.engine.file_chunks(rel)
        if parts is None:
            raise LookupError(f"{rel} is not an indexed module")
        parts = [c for c in parts if c.kind in METHOD_KINDS and fold(c.name) == fold(short)]
        if not parts:
            raise LookupError(f"no method {shown(short)} in {rel}")
        return parts[0], parts

    def _method_by_name(self, name: str) -> tuple[Chunk, list[Chunk]]:
        """(the first part, the chunks of that method from it on) of the best exact name match."""
        eng = self.engine
        res = eng.search(name, mode="lexical", top_k=20, filters=Filters(scope="code"))
        hits = [h for h in res.hits if h.match == "exact" and h.kind in METHOD_KINDS]
        if not hits:
            raise LookupError(f"no method named {shown(name)} (use Модуль.Метод or give the module path)")
        first = eng.get_chunk(hits[0].id)
        if first is None:  # re-indexed away between the search and this read
            raise LookupError(f"no method named {shown(name)} (the index changed meanwhile; ask again)")
        parts = [
            c
            for c in eng.file_chunks(first.path) or []
            if c.kind == first.kind and c.name == first.name and c.start_line >= first.start_line
        ]
        return first, parts

    # ------------------------------------------------------------------ docs (daemon.sources.docs)
    def doc_links(self):
        """:class:`daemon.sources.docs.DocLinks` of the current index, rebuilt after a batch changed it."""
        from ..sources.docs import DocLinks

        eng = self.engine
        key = (id(eng), eng.version)
        cached = self._doc_links_cache
        if cached is not None and cached[0] == key:
            return cached[1]
        with eng.lock:
            # no docs sections (most code roots): nothing to link; else only the docs sections
            # and the methods of the names they mention are read from the chunk store
            links = DocLinks.from_store(eng.store, eng.names) if eng.stats()["docs_sections"] else DocLinks()
            self._doc_links_cache = (key, links)
        return links

    def _doc_refs(self, ids) -> list:
        return self._doc_refs_counted(ids)[0]

    def _doc_refs_counted(self, ids) -> tuple[list, int]:
        """(the first :data:`daemon.sources.docs.MAX_DOC_REFS` docs sections that name any of
        ``ids``, how many name them in all)."""
        from ..sources.docs import MAX_DOC_REFS, doc_ref

        links = self.doc_links()
        out: dict[str, None] = {}
        for cid in ids:
            for d in links.mentions.get(cid, []):
                out[d] = None
        refs = []
        for d in out:
            c = self.engine.get_chunk(d)
            if c is not None:
                refs.append(doc_ref(c))
                if len(refs) == MAX_DOC_REFS:
                    break
        return refs, len(out)

    def doc_mentions(self, ids: list[str]) -> dict:
        """``{chunk id: [DocRef]}``: the docs sections that name each method (ids without any
        are left out)."""
        out = {}
        for cid in ids:
            refs = self._doc_refs([cid, cid.split("#", 1)[0]])
            if refs:
                out[cid] = refs
        return out

    def read_document(self, path: str, heading: str | None = None):
        """A docs page or its section under ``heading`` (:func:`daemon.sources.docs.read_document`).
        ``LookupError`` if it is not an indexed page or has no such heading."""
        from ..sources.docs import read_document

        rel = self.confine(path)
        sections = self.engine.file_chunks(rel, kind="docs")
        if sections is None:
            raise LookupError(f"{rel} is not an indexed docs page (search with scope docs lists them)")
        return read_document(sections, rel, self._read(rel), heading, self.doc_links())

    # ------------------------------------------------------------------ files
    def confine(self, path: str) -> str:
        """:meth:`Engine.confine`: ``path`` relative to the root, NFC; ``ValueError`` if it leaves the root."""
        return self.engine.confine(path)

    def _read(self, rel: str) -> list[str]:
        """The lines of a file under the root, decoded as the indexer decodes it."""
        return self._text(rel).splitlines()

    def _text(self, rel: str) -> str:
        """A file under the root, decoded as the indexer decodes it, without a BOM."""
        known = self.engine.is_indexed(rel)
        try:
            data = read_regular_bytes(self.root / disk_path(self.root, rel), self.max_file_bytes)
            text, _ = decode_bytes(data)
        except FileNotFoundError:
            raise LookupError(f"no such file: {rel}") from None
        except SkipFile as exc:
            if not known and exc.reason == "unreadable":
                raise LookupError(f"no such file: {rel}") from None
            raise ValueError(f"{rel}: {exc.reason}: {exc.detail}") from None
        if text.startswith("\ufeff"):
            text = text[1:]
        return text

    def add_context(self, refs: list, limit: int = CONTEXT_CHARS) -> None:
        """Fill each reference's ``context`` with its source line (stripped, cut to ``limit``
        characters): from the indexed method that holds it (no file read), else from the file,
        read once, its lines split as the chunker splits them (``\\r\\n``, ``\\r``, ``\\n``). A
        file that cannot be read leaves those references without context."""
        wanted: dict[str, set[int]] = {}
        for r in refs:
            wanted.setdefault(r.path, set()).add(r.line)
        found = {path: self.engine.source_lines(path, want) for path, want in wanted.items()}
        lines_of: dict[str, list[str] | None] = {}  # files read for the lines no method chunk holds
        for r in refs:
            line = found[r.path].get(r.line)
            if line is None:
                if r.path not in lines_of:
                    try:
                        text = self._text(r.path)
                        lines_of[r.path] = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
                    except (LookupError, ValueError, OSError):
                        lines_of[r.path] = None
                lines = lines_of[r.path]
                if lines is None or not 0 <= r.line < len(lines):
                    continue
                line = lines[r.line]
            line = line.strip()
            r.context = line if len(line) <= limit else line[: limit - 1] + "…"

    def _lines(self, rel: str, start: int, end: int) -> str:
        lines = self._read(rel)
        return "\n".join(lines[start - 1 : end])

    def read_module(self, path: str, start_line: int = 1, end_line: int | None = None) -> ModuleText:
        """Lines ``start_line..end_line`` (1-based, inclusive; ``end_line`` None = to the end) of
        a file under the root, at most :data:`MAX_READ_LINES` lines (``truncated`` and a
        ``note`` say when cut). ``ValueError`` for bad line numbers, ``LookupError`` for a
        missing file."""
        rel = self.confine(path)
        if start_line < 1 or (end_line is not None and end_line < start_line):
            raise ValueError(f"bad line range {start_line}..{end_line}: lines are 1-based and start <= end")
        lines = self._read(rel)
        total = len(lines)
        if start_line > max(total, 1):
            raise ValueError(f"start_line {start_line} is past the end of {rel} ({total} lines)")
        want_end = total if end_line is None else min(end_line, total)
        end = min(want_end, start_line + MAX_READ_LINES - 1)
        truncated = end < (total if end_line is None else end_line)
        note = ""
        if end < want_end:
            note = f"cut to {MAX_READ_LINES} lines; ask for start_line={end + 1} to continue"
        elif end_line is not None and end_line > total:
            note = f"the file has {total} lines"
        return ModuleText(
            path=rel,
            start_line=start_line,
            end_line=max(end, start_line - 1),
            total_lines=total,
            text="\n".join(lines[start_line - 1 : end]),
            truncated=truncated,
            note=note,
        )

    # ------------------------------------------------------------------ metadata and symbols
    def describe_object(self, name: str) -> ObjectDescription:
        """A metadata object by ``<Тип>.<Имя>``: the type in Russian, English or folder notation
        (``Справочник``, ``Catalog``, ``Catalogs``; case-insensitive), the name as indexed or in
        the other language than the configuration's names (``Catalog.Users`` finds
        ``Справочник.Пользователи`` on a Russian configuration: :meth:`translated_objects`; the
        answer's ``owner`` says which object it is). An object several projects define is
        described from its own definition (``also_in`` names the others:
        :func:`daemon.index.metadata_objects.definition_order`). ``ValueError`` for an unknown type or a
        name without one; ``LookupError`` if no such object is indexed, whose message always
        names the closest objects (similar names, the names channel's
        :meth:`Engine.similar_objects`, the translations, else the nearest spellings of that
        type) or says that the index has no object of that type."""
        eng = self.engine
        typ, _, obj = name.strip().partition(".")
        if not obj:
            raise ValueError(
                f"give the object as <Type>.<Name> (Справочник.Пользователи, Catalog.Users), got {shown(name)}"
            )
        ru = normalize_object_type(typ)
        if ru is None:
            from ..contract import object_type_list

            raise ValueError(f"unknown metadata object type {shown(typ)}; use one of: {object_type_list()}")
        try:
            o, fields, modules, also_in = eng.metadata_object(ru, obj)  # LookupError naming similar objects
        except LookupError as exc:
            translated = self.translated_objects(ru, obj)
            best = [owner for owner, score in translated if score == translated[0][1] < GUESS]
            if len(best) != 1:
                raise LookupError(self._not_found(exc, ru, name, [owner for owner, _ in translated])) from None
            o, fields, modules, also_in = eng.metadata_object(ru, best[0].split(".", 1)[1])
        desc = ObjectDescription(
            owner=o.owner,
            object_type=o.object_type,
            name=o.name,
            path=o.path,
            synonym=dict(o.synonym),
            comment=o.comment,
            properties=dict(o.properties),
            modules=dict(sorted(modules.items())),
            also_in=also_in,
        )
        _group_fields(desc, fields)
        return desc

    def translated_objects(self, object_type: str, name: str, limit: int = 5) -> list[tuple[str, int]]:
        """Objects of ``object_type`` whose name is ``name`` in the other language than its own
        (``Users`` -> ``Справочник.Пользователи``, ``Пользователи`` -> ``Catalog.Users`` on an
        English configuration): each word of ``name`` (:func:`daemon.text.lexicon.name_words`;
        a word the lexicon does not know is tried shortened by up to 3 letters, ``Userz`` ->
        ``user``) is translated and meets a word family of the object's name, in any order.
        ``[(owner, score)]``, best first, at most ``limit``: the number of the name's other
        words when every word met as written (below :data:`GUESS`: the object is meant), plus
        :data:`GUESS` per shortened word and 2 x :data:`GUESS` per word that did not meet
        (suggestions only); [] when nothing meets."""
        from ..text.lexicon import default_lexicon, family, in_script, name_words

        to = "en" if in_script(name, "ru") else "ru"
        lex = default_lexicon()
        words = list(dict.fromkeys(name_words(name)))
        wanted = []
        guessed = 0
        for w in words:
            for k in range(len(w), max(3, len(w) - 3) - 1, -1):
                fams = {family(t) for t in lex.translate([w[:k]], to)}
                if fams:
                    wanted.append(fams)
                    guessed += k < len(w)
                    break
        if not wanted:
            return []
        found = []
        for owner, obj in self.engine.object_names(object_type).items():
            fams = {family(t) for t in name_words(obj)}
            met = sum(1 for w in wanted if fams & w)
            if met:
                score = 2 * GUESS * (len(words) - met) + GUESS * guessed + max(len(fams) - met, 0)
                found.append((score, len(obj), owner))
        return [(owner, score) for score, _, owner in sorted(found)[:limit]]

    def _not_found(self, exc: LookupError, object_type: str, name: str, translated: list[str]) -> str:
        """The message of a ``describe_object`` that found nothing: ``exc``'s (similar names)
        and the closest objects; while objects of that type exist, never without a suggestion."""
        import difflib

        from ..text.folding import fold
        from ..text.lexicon import in_script

        text = str(exc)
        close = [c for c in translated + self.engine.similar_objects(name) if c not in text]
        close = list(dict.fromkeys(close))[:5]
        if close:
            return f"{text}; closest objects by name: {', '.join(close)}"
        if "; similar: " in text:
            return text
        names = self.engine.object_names(object_type)
        if not names:
            return f"{text}; the index has no metadata object of type {object_type}"
        obj = name.partition(".")[2]
        cyrillic = in_script(obj, "ru")
        same = {fold(n): owner for owner, n in names.items() if in_script(n, "ru") == cyrillic}
        near = [same[k] for k in difflib.get_close_matches(fold(obj), list(same), n=5, cutoff=0.0)]
        if near:
            return f"{text}; nothing close by name; nearest in spelling of the {len(names)} of that type: " + ", ".join(
                near
            )
        return (
            f"{text}; no object of that type is named like it, in either language; "
            f"the index has {len(names)} of that type, e.g. {', '.join(sorted(names)[:5])}"
        )

    def document_symbols(self, path: str) -> list[Chunk]:
        """The code chunks of one module in line order, texts left out (for
        ``textDocument/documentSymbol``: names, kinds, ranges, regions). ``LookupError`` if the
        file is not an indexed module."""
        rel = self.confine(path)
        chunks = self.engine.file_chunks(rel, kind="bsl")
        if chunks is None:
            raise LookupError(f"{rel} is not an indexed module")
        return [
            msgspec.structs.replace(c, text="")
            for c in sorted(chunks, key=lambda c: (c.start_line, c.id))
            if c.kind in CODE_KINDS
        ]


def _group_fields(desc: ObjectDescription, fields: list[Chunk]) -> None:
    """Put an object's field chunks into ``desc`` by kind; a tabular section's attributes go
    under it."""
    sections: dict[str, Field] = {}
    for c in sorted(fields, key=lambda c: c.start_line):
        f = Field(
            kind=c.kind,
            name=c.name,
            symbol=c.symbol,
            synonym=dict(c.synonym),
            types=list(c.types),
            comment=c.comment,
        )
        sym = c.symbol or ""
        if c.kind == "tabular_section":
            sections[c.name] = f
            desc.tabular_sections.append(f)
        elif c.kind == "attribute" and "." in sym.partition(":")[2]:
            ts = sym.partition(":")[2].split(".", 1)[0]
            if ts in sections:
                sections[ts].fields.append(f)
            else:
                desc.other_fields.append(f)
        else:
            getattr(desc, _FIELD_GROUPS.get(c.kind, "other_fields")).append(f)


def disk_path(root: Path, rel: str) -> str:
    """The on-disk spelling of ``rel`` (NFC, as the index stores it): itself if it exists, else
    the entry whose NFC form matches in each folder (macOS tools and some archives write NFD
    names). ``rel`` unchanged if nothing matches (the read then fails clearly)."""
    if os.path.lexists(root / rel):
        return rel
    from ..sources.scan import _disk_dir

    parent, _, name = rel.rpartition("/")
    disk_parent = _disk_dir(root, parent) if parent else ""
    if disk_parent is None:
        return rel
    try:
        names = os.listdir(root / disk_parent if disk_parent else root)
    except OSError:
        return rel
    for n in names:
        if unicodedata.normalize("NFC", n) == name:
            return f"{disk_parent}/{n}" if disk_parent else n
    return rel
