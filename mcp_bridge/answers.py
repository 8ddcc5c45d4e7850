"""The daemon's answers as the tools' output models (:mod:`mcp_bridge.models`), compact by default.

Every tool returns :func:`answer`: the model's fields that differ from their defaults, once as
``structuredContent`` and once as compact JSON text (the copy a client without structured output
shows the model). The ``detail`` fields are filled only when the caller asked for them.
"""

from __future__ import annotations

import json
import re
import time
from typing import TYPE_CHECKING

import msgspec
from mcp_types import CallToolResult, TextContent

from daemon import notes
from daemon.contract import CODE_KINDS, DOCS_KINDS, PLATFORM_KINDS

from .models import (
    DenseInfo,
    DocMention,
    IndexInfo,
    MetaField,
    PlatformEntryOut,
    PlatformInfo,
    PlatformParamOut,
    PlatformSignatureOut,
    RootStatus,
    SearchHit,
    SharedCacheInfo,
    SkippedFile,
    SymbolDef,
    _Out,
)

if TYPE_CHECKING:
    from .links import RootLink

#: Longest ``summary`` (characters; cut on a word, with "…").
SUMMARY_CHARS = 100
#: The end of a sentence: a full stop, "!" or "?" before a space and a capital letter.
_SENTENCE_END = re.compile(r"[.!?](?=\s+[A-ZА-ЯЁ])")
#: Docs sections listed per definition by ``find_symbol`` (``docs_total`` counts them all).
SYMBOL_DOCS = 3


def answer(out: _Out) -> CallToolResult:
    """``out`` as a tool result: its non-default fields as structured content and as JSON text."""
    data = out.model_dump(mode="json", exclude_defaults=True)
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


# ------------------------------------------------------------------------------ names
def qualified(kind: str, name: str, owner: str) -> str:
    """``Модуль.Метод`` for code, the owner for an object, ``owner.name`` for a field (the
    ``name`` a model passes back to ``get_method`` or ``describe_object``), ``Тип.Метод``,
    ``Новый Тип`` or the name for a platform help entry (``platform_help``)."""
    if kind in PLATFORM_KINDS:
        if kind == "platform_constructor":
            return f"Новый {owner or name}"
        return f"{owner}.{name}" if owner else name
    if kind == "object":
        return owner
    if kind in CODE_KINDS:
        short = owner.split(".")[1] if "." in owner else owner
        return f"{short}.{name}" if short else name
    return f"{owner}.{name}"


def _fold(text: str) -> str:
    return text.strip().casefold().replace("ё", "е")


def honest_match(match: str, query: str, name: str, owner: str, qualified_name: str) -> str:
    """The names channel's ``match`` as the answer states it: ``exact`` only when the query is
    the hit's whole name (bare, ``Модуль.Метод`` or ``Тип.Имя``); a qualified query whose method
    name matched in another module is ``name``."""
    if match != "exact":
        return match
    q = _fold(query)
    if q in {_fold(name), _fold(qualified_name), _fold(owner), _fold(f"{owner}.{name}")}:
        return "exact"
    return "name"


def doc_summary(doc: str, limit: int = SUMMARY_CHARS) -> str:
    """What a ``//`` doc comment says a method does: the first sentence of its first paragraph (up
    to a blank comment line or a section line such as ``Параметры:``), cut to ``limit`` characters."""
    words: list[str] = []
    for raw in doc.splitlines():
        line = raw.strip()
        if not line.startswith("//"):
            break
        line = line.lstrip("/").strip()
        if not line:
            if words:
                break
            continue
        if line.endswith(":") and len(line.split()) <= 3:  # Параметры:, Возвращаемое значение:, Пример:
            break
        words.append(line)
    text = " ".join(words)
    for end in _SENTENCE_END.finditer(text):
        word = text[: end.start()].rsplit(" ", 1)[-1]
        if len(word) > 3:  # not an abbreviation: "См.", "т.е.", "Стр."
            return cut(text[: end.start() + 1], limit)
    return cut(text, limit)


def cut(text: str, limit: int) -> str:
    """``text`` up to ``limit`` characters, cut after a word with "…" when longer."""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    space = head.rfind(" ")
    return (head[:space] if space > limit // 2 else head).rstrip(" ,;:") + "…"


def _hit_summary(h) -> str:
    if h.kind in PLATFORM_KINDS:
        return cut(h.snippet, SUMMARY_CHARS)  # the entry's first sentence
    if h.kind in CODE_KINDS:
        return doc_summary(h.snippet)
    if h.kind in DOCS_KINDS:
        return ""
    return cut(" ".join(h.snippet.split()), SUMMARY_CHARS)  # metadata: the synonym and description


def name_line(h) -> int:
    """The line a hit is cited by: its name's line (a method's header), else its first."""
    nr = h.name_range
    return nr[0] + 1 if nr and (nr[0] or nr[2]) else h.start_line


# ------------------------------------------------------------------------------ search, find_symbol
def search_hit(h, query: str, *, detail: bool) -> SearchHit:
    """A daemon ``Hit`` as a search result."""
    qn = qualified(h.kind, h.name, h.owner)
    hit = SearchHit(
        path=h.path,
        line=name_line(h),
        kind=h.kind,
        qualified_name=qn,
        export=h.export,
        match=honest_match(h.match, query, h.name, h.owner, qn),
        summary=_hit_summary(h),
        stale=h.stale,
        page_problem=h.page_problem,
        test=h.test,
    )
    if h.kind in DOCS_KINDS:
        hit.heading_path = h.signature
        hit.link = f"{h.path}#{h.anchor}" if h.anchor else h.path
    if detail:
        hit.name, hit.owner, hit.object_type, hit.module_kind = h.name, h.owner, h.object_type, h.module_kind
        hit.start_line, hit.end_line = h.start_line, h.end_line
        hit.signature, hit.snippet, hit.score, hit.ranks = h.signature, h.snippet, h.score, dict(h.ranks)
    return hit


def mention(d) -> DocMention:
    """A daemon ``DocRef`` as a docs mention."""
    return DocMention(link=d.link, heading_path=d.heading_path, line=d.line)


def symbol_def(h, chunk, mentions: list, query: str, *, detail: bool) -> SymbolDef:
    """A daemon ``Hit`` and its ``Chunk`` (None if it was replaced meanwhile) as a definition."""
    qn = qualified(h.kind, h.name, h.owner)
    doc = chunk.doc if chunk else ""
    s = SymbolDef(
        qualified_name=qn,
        kind=h.kind,
        path=h.path,
        line=name_line(h),
        end_line=h.end_line,
        match=honest_match(h.match, query, h.name, h.owner, qn),
        signature=h.signature,
        summary=doc_summary(doc) if not detail else "",
        export=h.export,
        docs=[mention(d) for d in (mentions if detail else mentions[:SYMBOL_DOCS])],
        docs_total=len(mentions),
        stale=h.stale,
    )
    if chunk is not None:
        s.is_async, s.directives, s.annotations = chunk.is_async, list(chunk.directives), list(chunk.annotations)
        s.synonym, s.types = dict(chunk.synonym), list(chunk.types)
    if detail:
        s.name, s.owner, s.object_type, s.module_kind = h.name, h.owner, h.object_type, h.module_kind
        s.start_line, s.doc = h.start_line, doc
        s.region = list(chunk.region) if chunk else []
    return s


# ------------------------------------------------------------------------------ platform help
def platform_entry(e, hit, *, exact: bool, detail: bool) -> PlatformEntryOut:
    """A daemon ``PlatformEntry`` (with its ``Hit``) as an answer: for a name (``exact``) every
    signature variant with its parameters; for a question one line (the first signature and the
    first sentence); ``detail`` adds the description, example, see also, note and the ranks."""
    since = e.since + (f"; not recommended since {e.deprecated_since}" if e.deprecated_since else "")
    out = PlatformEntryOut(
        qualified_name=e.qualified,
        name_en=e.qualified_en,
        kind=e.kind,
        returns=_returns(e) if exact or detail else "",  # a question's one line: the signature has the type
        value_type=" | ".join(e.value_types) + (" (read only)" if e.value_types and e.readonly else ""),
        summary=_first_sentence(e.description, SUMMARY_CHARS if not detail else SUMMARY_CHARS * 2),
        availability=list(e.availability),
        since=since.lstrip("; "),
    )
    if exact or detail:
        out.signatures = [
            PlatformSignatureOut(
                syntax=_render(e, s),
                variant=s.name if len(e.signatures) > 1 else "",
                params=[
                    PlatformParamOut(
                        name=p.name,
                        types=list(p.types),
                        optional=p.optional,
                        description=(f"default {p.default}. " if p.default else "")
                        + (p.description if detail else _first_sentence(p.description, SUMMARY_CHARS)),
                    )
                    for p in s.params
                ],
            )
            for s in e.signatures
        ]
    elif e.signatures:
        out.signatures = [PlatformSignatureOut(syntax=_render(e, e.signatures[0]))]
    if detail:
        out.description, out.description_en, out.example = e.description, e.description_en, e.example
        out.see_also, out.note, out.category = list(e.see_also), e.note, e.category
        if hit is not None and not exact:
            out.score, out.ranks = hit.score, dict(hit.ranks)
    return out


def _render(e, sig) -> str:
    """One line for a signature: ``СтрНайти(Строка: Строка, НачальнаяПозиция?: Число): Число``
    (as ``daemon.sources.platform.entries.render_signature``, which the front end does not load)."""
    params = ", ".join(
        p.name + ("?" if p.optional else "") + (": " + "|".join(p.types) if p.types else "") for p in sig.params
    )
    head = f"Новый {e.owner or e.name}" if e.kind == "constructor" else e.name
    ret = ": " + "|".join(e.return_types) if e.return_types and e.kind != "constructor" else ""
    return f"{head}({params}){ret}"


def _returns(e) -> str:
    types = " | ".join(e.return_types)
    meaning = _first_sentence(e.returns)
    return f"{types}: {meaning}" if types and meaning else types or meaning


def _first_sentence(text: str, limit: int = SUMMARY_CHARS * 2) -> str:
    flat = " ".join((text or "").split())
    for end in _SENTENCE_END.finditer(flat):
        word = flat[: end.start()].rsplit(" ", 1)[-1]
        if len(word) > 3:
            return cut(flat[: end.start() + 1], limit)
    return cut(flat, limit)


def platform_info(p) -> PlatformInfo | None:
    """The platform help block of a root's status (``Status.platform``; None from a daemon
    without it)."""
    if p is None:
        return None
    sources = {}
    for s in p.sources:
        name = s.version or "bundled"
        vectors = f", {s.vectors} vectors" if s.vectors else ""
        sources[name] = f"{s.state}: {s.entries} entries{vectors}" + (f" ({s.error})" if s.error else "")
    mode = f" (CompatibilityMode {p.compatibility_mode})" if p.compatibility_mode else ""
    state = f" ({p.used.state})" if p.used.state != "ready" else ""
    return PlatformInfo(answers=p.used.label + state, sources=sources, why=p.used.why + mode)


# ------------------------------------------------------------------------------ index state
def index_info(st) -> IndexInfo:
    """The index block of an answer, from the daemon's ``Status``."""
    return IndexInfo(
        state=st.state,
        progress=notes.index_progress(st),
        dense_done=st.dense.done,
        dense_total=st.dense.total if st.dense.enabled else 0,
    )


def starting_info(link: RootLink) -> IndexInfo:
    """The index block while the root's daemon does not answer yet."""
    waited = time.monotonic() - link.since if link.since is not None else 0.0
    return IndexInfo(state="starting", progress=f"the daemon is starting ({waited:.0f} s so far)")


def meta_field(f) -> MetaField:
    """A daemon metadata field (recursively: a tabular section's attributes)."""
    return MetaField(
        kind=f.kind,
        name=f.name,
        synonym=dict(f.synonym),
        types=list(f.types),
        comment=f.comment,
        fields=[meta_field(x) for x in f.fields],
    )


def _shared_info(sc) -> SharedCacheInfo | None:
    if sc is None:
        return None
    return SharedCacheInfo(
        url=sc.url,
        mode=sc.mode,
        state=sc.state,
        hits=sc.hits,
        misses=sc.misses,
        written=sc.written,
        unreached=sc.unreached,
        unsent=sc.unsent,
        last_error=sc.last_error,
        retry_in_s=sc.retry_in_s,
    )


def root_status(link: RootLink, res, *, detail: bool) -> RootStatus:
    """One root's ``index_status`` from the daemon's ``StatusResult``: compact, or everything
    ``bsl-lens status -v`` shows with ``detail``."""
    st, d = res.service, res.service.dense
    out = RootStatus(
        name=link.name,
        root=st.root,
        running=True,
        state=st.state,
        warming=notes.lexical_warming(st) or notes.dense_warming(st),
        progress=notes.index_progress(st),
        error=st.last_error or "",
        format=st.format,
        files=st.files,
        modules=st.modules,
        methods=st.methods,
        metadata_chunks=st.metadata_chunks,
        docs_pages=st.docs_pages,
        docs_sections=st.docs_sections,
        chunks=st.chunks,
        dense=DenseInfo(
            enabled=d.enabled,
            done=d.done,
            total=d.total,
            rate_per_s=d.rate_per_s if d.done < d.total else 0.0,
            eta_s=d.eta_s if d.done < d.total else None,
            shared_cache=_shared_info(d.shared_cache),
        ),
        platform=platform_info(getattr(st, "platform", None)),
        watcher=st.watcher.mode,
        stale_count=st.stale_count,
        skipped_count=st.skipped_count,
        skipped=dict(st.skipped),
        docs_problem_count=st.docs_problem_count,
    )
    if detail:
        data = msgspec.to_builtins(st)
        data["running"] = True
        data["daemon"] = msgspec.to_builtins(res.daemon)
        out.dense.embedder, out.dense.model = d.embedder, d.model
        out.stale_files = list(st.stale_files)
        out.docs_problems = dict(st.docs_problems)
        out.skipped_files = [SkippedFile(path=k.path, reason=k.reason, detail=k.detail) for k in st.skipped_files]
        out.pid, out.uptime_s, out.index_dir, out.log = st.pid, st.uptime_s, st.index_dir, res.daemon.log
        out.summary = notes.format_status(data)
    elif out.platform is not None:
        out.platform.why = ""
    return out
