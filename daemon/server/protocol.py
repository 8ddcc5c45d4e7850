"""The daemon's wire protocol: NDJSON messages shaped like JSON-RPC 2.0, encoded with msgspec.

One message per line (UTF-8 JSON, ``\\n``-terminated; msgspec never emits a raw newline
inside a value). Three shapes share one connection::

    request   {"jsonrpc":"2.0","id":1,"method":"search","params":{"query":"НДС"}}
    response  {"jsonrpc":"2.0","id":1,"result":{...}}
              {"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"...","data":{...}}}
    push      {"jsonrpc":"2.0","method":"progress","params":{...}}          (no id)

The first request on a connection must be ``hello`` (:class:`HelloParams`); a client that
speaks another :data:`PROTOCOL_VERSION` gets :data:`VERSION_MISMATCH` and should ask the
user to restart the daemon. Every method's params are a struct with
``forbid_unknown_fields=True``: an unknown or mistyped parameter is :data:`INVALID_PARAMS`
with the field named in the message. Pushes (``progress``, ``indexed``, ``state``) go only
to connections that said ``subscribe: true`` in ``hello``; their params are the dicts the
:class:`daemon.service.service.Service` listener receives.

Result types of the query methods are the structs of :mod:`daemon.contract` (which imports
only msgspec), so a client decodes every answer without loading the engine.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, NamedTuple

import msgspec

from ..contract import (
    DEFAULT_MODE,
    DEFAULT_REF_LIMIT,
    DEFAULT_SYMBOL_LIMIT,
    DEFAULT_TOP_K,
    MAX_GRAPH_DEPTH,
    MAX_GRAPH_FAN_OUT,
    MAX_REF_LIMIT,
    MAX_TOP_K,
    Callees,
    CallGraph,
    Chunk,
    Definition,
    DocRef,
    DocumentText,
    Filters,
    MethodInfo,
    ModuleText,
    ObjectDescription,
    References,
    PlatformAnswer,
    SearchResult,
    Status,
)

#: Bump on any incompatible change to a method, its params or its result.
PROTOCOL_VERSION = 1

#: Longest request line the daemon reads (bytes, newline included); longer gets
#: :data:`REQUEST_TOO_LARGE` and the connection is closed. Responses are not limited.
MAX_REQUEST_BYTES = 1 << 20

# JSON-RPC 2.0 standard codes.
PARSE_ERROR = -32700  # the line is not JSON
INVALID_REQUEST = -32600  # JSON, but not a request object (no method, no id, hello missing)
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602  # unknown/missing/mistyped param, or the service raised ValueError
INTERNAL_ERROR = -32603  # any other exception; data = {"type", "traceback"}
# bsl-lens codes.
NOT_FOUND = -32001  # the service raised LookupError (no such chunk, module, object)
VERSION_MISMATCH = -32002  # hello with another PROTOCOL_VERSION: restart the daemon
SHUTTING_DOWN = -32003  # the daemon is stopping and takes no new requests
REQUEST_TOO_LARGE = -32004  # request line > MAX_REQUEST_BYTES; the connection is closed

#: Push notification methods (server -> client, no id).
PUSH_METHODS = ("progress", "indexed", "state")


# ------------------------------------------------------------------------------ envelope
class ErrorObject(msgspec.Struct, omit_defaults=True):
    """The ``error`` member of a failed response."""

    code: int
    message: str
    data: Any = None


class Message(msgspec.Struct, omit_defaults=True):
    """Any message on the wire; which members are set tells its shape.

    ``params``/``result`` stay raw JSON (an empty :class:`msgspec.Raw` when absent) so they
    can be decoded into the method's own type afterwards, with precise error paths.
    """

    jsonrpc: str = "2.0"
    id: int | str | None = None
    method: str | None = None
    params: msgspec.Raw = msgspec.Raw()
    result: msgspec.Raw = msgspec.Raw()
    error: ErrorObject | None = None

    @property
    def is_request(self) -> bool:
        """A request: has a method and an id."""
        return self.method is not None and self.id is not None

    @property
    def is_push(self) -> bool:
        """A push notification: a method without an id."""
        return self.method is not None and self.id is None


class _Request(msgspec.Struct, omit_defaults=True):
    jsonrpc: str
    id: int | str
    method: str
    params: Any = None


class _Result(msgspec.Struct):
    jsonrpc: str
    id: int | str | None
    result: Any


class _Error(msgspec.Struct):
    jsonrpc: str
    id: int | str | None
    error: ErrorObject


class _Push(msgspec.Struct):
    jsonrpc: str
    method: str
    params: Any


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Message)


def encode_request(id: int | str, method: str, params: Any = None) -> bytes:
    """One request line (``\\n`` included). ``params``: a struct, a dict or None."""
    return _encoder.encode(_Request("2.0", id, method, params)) + b"\n"


def encode_result(id: int | str | None, result: Any) -> bytes:
    """One success response line. ``result`` is anything msgspec encodes (structs, dicts)."""
    return _encoder.encode(_Result("2.0", id, result)) + b"\n"


def encode_error(id: int | str | None, code: int, message: str, data: Any = None) -> bytes:
    """One error response line; ``id`` is None when the request's id could not be read."""
    return _encoder.encode(_Error("2.0", id, ErrorObject(code, message, data))) + b"\n"


def encode_push(method: str, params: Any) -> bytes:
    """One push notification line (no id)."""
    return _encoder.encode(_Push("2.0", method, params)) + b"\n"


def decode_message(line: bytes) -> Message:
    """Decode one line into a :class:`Message`.

    Raises ``msgspec.DecodeError`` (not JSON: :data:`PARSE_ERROR`) or
    ``msgspec.ValidationError`` (JSON of the wrong shape: :data:`INVALID_REQUEST`).
    """
    return _decoder.decode(line)


def decode_raw(raw: msgspec.Raw, type_: Any) -> Any:
    """Decode a raw ``params``/``result`` member into ``type_``; absent decodes as ``{}``
    for struct types (all-default params) and as None otherwise."""
    data = bytes(raw) if len(raw) else b"null"
    if data == b"null" and isinstance(type_, type) and issubclass(type_, msgspec.Struct):
        data = b"{}"
    return msgspec.json.decode(data, type=type_)


# ------------------------------------------------------------------------------ params
class _Params(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    pass


class WireFilters(Filters, forbid_unknown_fields=True):
    """:class:`daemon.contract.Filters` as a parameter: same fields, unknown ones rejected."""


#: ``search``'s ``top_k`` and ``symbols``' ``limit``: 1..:data:`daemon.contract.MAX_TOP_K`
#: (the engine's own bound, so a value the params accept is one the engine accepts).
TopK = Annotated[int, msgspec.Meta(ge=1, le=MAX_TOP_K)]
Line = Annotated[int, msgspec.Meta(ge=1)]
Seconds = Annotated[float, msgspec.Meta(ge=0, le=3600)]
#: How long a query may wait for the changes noticed so far to be applied
#: (``daemon.service.freshness.MAX_FRESH_S``).
FreshSeconds = Annotated[float, msgspec.Meta(ge=0, le=60)]


class HelloParams(_Params):
    """First request on every connection. ``token`` is only checked on Windows (TCP)."""

    protocol: int
    client: str = ""  # "cli", "lsp", "mcp", "tests": for the daemon log
    version: str = ""  # the client's bsl-lens version, logged
    subscribe: bool = False  # receive progress/indexed/state pushes on this connection
    token: str = ""


class SearchParams(_Params):
    """``search``: a query by meaning or by words, ranked by RRF over the channels of ``mode``."""

    query: str
    mode: str = DEFAULT_MODE  # one of contract.SEARCH_MODES (ValueError otherwise -> -32602)
    top_k: TopK = DEFAULT_TOP_K
    filters: WireFilters | None = None
    remember: bool = True  # keep it in status.recent_queries (False: eval runs of `bsl-lens report`)
    fresh_timeout: FreshSeconds = 0.0  # wait up to this many seconds for noticed changes to be applied first


class SymbolsParams(_Params):
    """``symbols``: a name query for symbol pickers (``workspace/symbol``), names channel first."""

    query: str
    limit: TopK = DEFAULT_SYMBOL_LIMIT
    filters: WireFilters | None = None
    slim: bool = False  # hits without snippets (symbol pickers)
    fresh_timeout: FreshSeconds = 0.0  # as in SearchParams


class GetChunkParams(_Params):
    """``get_chunk``: one chunk by its id (:class:`daemon.contract.Chunk` ``.id``)."""

    chunk_id: str


class GetMethodParams(_Params):
    """``get_method``: one method with its full text, by ``Модуль.Метод`` or by name in ``path``."""

    name: str  # "Модуль.Метод", or a bare method name together with path
    path: str | None = None
    fresh_timeout: FreshSeconds = 0.0  # as in SearchParams


class ReadModuleParams(_Params):
    """``read_module``: lines of a file under the export root."""

    path: str  # relative to the export root
    start_line: Line = 1  # 1-based, inclusive
    end_line: Line | None = None  # inclusive; None = to the end


class ReadDocumentParams(_Params):
    """``read_document``: a docs page, or one section of it by heading."""

    path: str  # relative to the export root
    heading: str | None = None  # heading text, anchor or "A > B" path; None = the whole page


class DocMentionsParams(_Params):
    """``doc_mentions``: the docs sections that name each of these method chunk ids."""

    ids: list[str]


class DescribeObjectParams(_Params):
    """``describe_object``: a metadata object with its fields and modules."""

    name: str  # "Справочник.Пользователи" | "Catalog.Users"
    fresh_timeout: FreshSeconds = 0.0  # as in SearchParams


class DocumentSymbolsParams(_Params):
    """``document_symbols``: the code chunks of one module, texts left out."""

    path: str


#: A 0-based line or UTF-16 column (an LSP position), and the find-usages bounds.
Position = Annotated[int, msgspec.Meta(ge=0)]
RefLimit = Annotated[int, msgspec.Meta(ge=1, le=MAX_REF_LIMIT)]
GraphDepth = Annotated[int, msgspec.Meta(ge=1, le=MAX_GRAPH_DEPTH)]
FanOut = Annotated[int, msgspec.Meta(ge=1, le=MAX_GRAPH_FAN_OUT)]


class _RefTargetParams(_Params):
    """What a find-usages question is about, exactly one of: ``name`` (``Модуль.Метод``, a bare
    method name, a metadata object ``Справочник.Валюты``, a common module's name), ``target`` (a
    method id, ``<path>::<Name>``), or a position: ``path`` (relative to the root) with 0-based
    ``line`` and UTF-16 ``character`` (a call or a string naming a method there, else the method
    whose name is there)."""

    name: str | None = None
    target: str | None = None
    path: str | None = None
    line: Position | None = None
    character: Position | None = None


class ReferencesParams(_RefTargetParams):
    """``references``: who references the methods of the target (find usages)."""

    limit: RefLimit = DEFAULT_REF_LIMIT  # references listed; the counts cover all of them
    possible: bool = False  # also list unresolved sites with the same method name
    locate: bool = False  # callers: where each listed caller method is
    context: bool = False  # each reference's source line
    fresh_timeout: FreshSeconds = 0.0  # as in SearchParams


class CalleesParams(_RefTargetParams):
    """``callees``: what the (first) method of the target references, resolved or not."""

    locate: bool = False  # targets: where each resolved callee is
    context: bool = False
    fresh_timeout: FreshSeconds = 0.0


class CallGraphParams(_RefTargetParams):
    """``call_graph``: callers or callees of the (first) method of the target, bounded."""

    direction: str = "callers"  # one of contract.GRAPH_DIRECTIONS (ValueError otherwise -> -32602)
    depth: GraphDepth = 2
    fan_out: FanOut = 10
    fresh_timeout: FreshSeconds = 0.0


class DefinitionParams(_Params):
    """``definition``: the call or string naming a method at a position, and where it is."""

    path: str  # relative to the export root
    line: Position  # 0-based
    character: Position  # UTF-16, 0-based


class PlatformHelpParams(_Params):
    """``platform_help``: the platform's reference for a name (that entry) or a question
    (ranked entries), from the version that answers for this root (or ``version``)."""

    query: str
    mode: str = DEFAULT_MODE  # as SearchParams.mode
    top_k: TopK = 5
    kind: str | None = None  # only entries of this kind: function, type, method, property, enum_value, ...
    version: str | None = None  # an installed version, a prefix of one, or "bundled"; None: the chosen one
    names_only: bool = False  # only entries the query names exactly (hover): no search for a question


class StatusParams(_Params):
    """``status``: no parameters."""

    pass


class ReindexParams(_Params):
    """``reindex``: queue a re-check of some paths, or of the whole export."""

    full: bool = False  # a full reconcile with the disk instead of the given paths
    paths: list[str] | None = None  # relative to the root; None with full=False = reconcile


class WaitIdleParams(_Params):
    """``wait_idle``: wait up to ``timeout`` seconds until nothing is queued or running."""

    timeout: Seconds = 30.0


class ShutdownParams(_Params):
    """``shutdown``: no parameters; the daemon saves and exits after answering."""

    pass


# ------------------------------------------------------------------------------ results
class HelloResult(msgspec.Struct, kw_only=True):
    """Who answered: enough for a client to report and to check it found the right daemon."""

    protocol: int
    version: str  # daemon.__version__ of the daemon process
    pid: int
    root: str  # resolved export root
    index_dir: str
    started_at: float  # time.time() when the daemon started serving (epoch seconds)
    socket: str = ""  # Unix socket path, or "tcp:127.0.0.1:<port>" on Windows
    log: str = ""  # the daemon's log file


class DaemonInfo(msgspec.Struct, kw_only=True):
    """The server's own part of ``status`` (the service's part is :class:`StatusResult.service`)."""

    pid: int
    version: str
    protocol: int
    root: str
    index_dir: str
    socket: str
    log: str
    started_at: float  # epoch seconds
    uptime_s: float  # seconds since started_at
    connections: int  # open client connections right now
    requests: int  # requests answered since start (errors included)
    errors: int  # of which error replies


class StatusResult(msgspec.Struct, kw_only=True):
    """``status`` result: the daemon's own facts plus ``Service.status()``.

    ``service`` is :class:`daemon.contract.Status` (what ``Service.status()`` returns).
    """

    daemon: DaemonInfo
    service: Status


class Ack(msgspec.Struct):
    """Result of methods that only start something (``reindex``, ``shutdown``)."""

    ok: bool = True


class WaitIdleResult(msgspec.Struct):
    """Result of ``wait_idle``."""

    idle: bool  # False when the timeout passed first


# ------------------------------------------------------------------------------ methods
class MethodSpec(NamedTuple):
    """One method of :data:`METHODS`: its params struct and its result type."""

    params: type[msgspec.Struct]
    result: Any  # the type the result decodes into


#: Every method the daemon serves: its params struct and its result type.
METHODS: dict[str, MethodSpec] = {
    "hello": MethodSpec(HelloParams, HelloResult),
    "search": MethodSpec(SearchParams, SearchResult),
    "symbols": MethodSpec(SymbolsParams, SearchResult),
    "get_chunk": MethodSpec(GetChunkParams, Chunk),
    "get_method": MethodSpec(GetMethodParams, MethodInfo),
    "read_module": MethodSpec(ReadModuleParams, ModuleText),
    "describe_object": MethodSpec(DescribeObjectParams, ObjectDescription),
    "read_document": MethodSpec(ReadDocumentParams, DocumentText),
    "doc_mentions": MethodSpec(DocMentionsParams, dict[str, list[DocRef]]),
    "document_symbols": MethodSpec(DocumentSymbolsParams, list[Chunk]),
    "references": MethodSpec(ReferencesParams, References),
    "callees": MethodSpec(CalleesParams, Callees),
    "call_graph": MethodSpec(CallGraphParams, CallGraph),
    "definition": MethodSpec(DefinitionParams, Definition),
    "platform_help": MethodSpec(PlatformHelpParams, PlatformAnswer),
    "status": MethodSpec(StatusParams, StatusResult),
    "reindex": MethodSpec(ReindexParams, Ack),
    "wait_idle": MethodSpec(WaitIdleParams, WaitIdleResult),
    "shutdown": MethodSpec(ShutdownParams, Ack),
}


def result_type(method: str) -> Any:
    """The type a method's result decodes into (a :mod:`daemon.contract` or local struct).

    Raises KeyError for a method not in :data:`METHODS`.
    """
    return METHODS[method].result


def field_of(exc: msgspec.ValidationError) -> str | None:
    """The parameter a msgspec validation error is about, as a dotted path: ``topk`` for
    "unknown field `topk`", ``filters.scopee`` for one inside ``filters``, ``top_k`` for
    "Expected `int`, got `str` - at `$.top_k`"; None when the error names no field."""
    text = str(exc)
    m = re.search(r"field `([^`]*)`", text)
    at = re.search(r"- at `\$\.?([^`]*)`", text)
    parts = [x for x in ((at.group(1) if at else ""), (m.group(1) if m else "")) if x]
    return ".".join(parts) if parts else None
