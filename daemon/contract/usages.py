"""Find usages on the wire: the reference kinds and their groups, why a reference is unresolved,
the bounds of ``references`` and ``call_graph``, and their answers (:class:`References`,
:class:`Callees`, :class:`CallGraph`, :class:`Definition`) with the records they hold
(:class:`Reference`, :class:`MethodRef`, :class:`RefCounts`, :class:`GraphEdge`)."""

from __future__ import annotations

import msgspec

#: Reference kind -> its group (find usages, :mod:`daemon.sources.references`): ``call`` (a
#: call written in code: ``Метод(…)``, ``Модуль.Метод(…)``, a manager's, ``ЭтотОбъект``'s,
#: ``ПродолжитьВызов``), ``string`` (a method named by a string or a handler reference:
#: notification and idle handlers, background jobs, SSL's long operations and call-by-name
#: helpers, ``ДобавитьОбработчик``), ``metadata`` (an event subscription, a scheduled job,
#: form, item and command events, HTTP and web service handlers, a platform event, an
#: extension's ``&Перед``/``&После``/``&Вместо``), ``dynamic`` (``Выполнить``/``Вычислить``
#: or a helper given a computed name: nobody can tell what it calls).
REF_KINDS: dict[str, str] = {
    "call": "call",
    "member": "call",
    "manager": "call",
    "this": "call",
    "proceed": "call",
    "notify": "string",
    "idle": "string",
    "background": "string",
    "long_operation": "string",
    "by_name": "string",
    "handler": "string",
    "subscription": "metadata",
    "scheduled_job": "metadata",
    "form_event": "metadata",
    "form_item_event": "metadata",
    "form_command": "metadata",
    "http_handler": "metadata",
    "web_operation": "metadata",
    "platform_event": "metadata",
    "extension": "metadata",
    "dynamic": "dynamic",
}
#: The groups of :data:`REF_KINDS`, in the order answers count them.
REF_GROUPS = ("call", "string", "metadata", "dynamic")
#: Why a reference is unresolved: the module (common module, object manager, base
#: configuration) is not in the index; it has no method of that name; the method is not
#: exported; the receiver is a variable whose type is unknown (never guessed); the name is
#: computed.
REASONS = ("unknown_module", "no_such_method", "not_exported", "unknown_variable_type", "dynamic")
#: ``call_graph`` directions: who calls the method, what the method calls.
GRAPH_DIRECTIONS = ("callers", "callees")
#: Most references one ``references`` call lists (``limit``; the counts always cover all of
#: them), and its default.
MAX_REF_LIMIT = 10_000
DEFAULT_REF_LIMIT = 100
#: Most methods one name stands for in a ``references`` or ``call_graph`` answer (a bare name
#: like ``ПриСозданииНаСервере`` names hundreds; ``targets_total`` counts them all).
MAX_REF_TARGETS = 50
#: ``call_graph`` bounds: levels walked and neighbours expanded per node.
MAX_GRAPH_DEPTH = 10
MAX_GRAPH_FAN_OUT = 100


class Reference(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One reference to a method (:mod:`daemon.index.refgraph`): where it is (``path``; ``line``,
    ``col``..``end``: the site's LSP range, a 0-based line and UTF-16 columns like
    :attr:`Chunk.name_range`: add 1 for the 1-based lines of the other records), from which
    method (``caller``: a method id, ``<path>::<Name>``; ``None`` for module-level code, metadata
    and the platform), the ``kind`` (:data:`REF_KINDS`), the callee as written, the ``detail``
    (the event, the helper, the annotation), and what it resolved to (``target``, a method id)
    or why not (``reason``, one of :data:`REASONS`). ``context``: the source line, stripped and
    cut (filled when asked for)."""

    path: str
    line: int
    col: int
    end: int
    caller: str | None = None
    kind: str
    callee: str
    detail: str = ""
    target: str | None = None
    reason: str | None = None
    context: str = ""


class RefCounts(msgspec.Struct, kw_only=True):
    """How complete a references answer is, counted apart: ``resolved`` calls, ``string``
    references (a method named by a string or a handler reference), ``metadata`` bindings
    (subscriptions, jobs, forms, services, platform events, extensions), ``possible`` callers
    (unresolved sites with the same method name: calls through variables whose type is
    unknown), and the configuration's ``dynamic`` sites (``Выполнить``/``Вычислить`` and
    computed names: any of them may call the method, so the answer is a lower bound when > 0)."""

    resolved: int = 0
    string: int = 0
    metadata: int = 0
    possible: int = 0
    dynamic: int = 0


class RefAnswer(msgspec.Struct, kw_only=True):
    """Who references one method (:meth:`daemon.index.refgraph.RefGraph.references`):
    ``references`` (sorted by path and position, at most ``limit``), ``possible`` (unresolved
    sites with the same name, on request), the counts, ``total`` (references before the cut),
    ``truncated``, and ``lower_bound`` (dynamic sites exist)."""

    target: str
    references: list[Reference]
    possible: list[Reference] = []
    counts: RefCounts
    total: int
    truncated: bool = False
    lower_bound: bool = False


class GraphEdge(msgspec.Struct, array_like=True):
    """``source`` calls ``dest`` (method ids; a binding's source is ``<path>#<kind>:<detail>``,
    module-level code's ``<path>::<module>``) in ``count`` sites of ``kind`` (the first site's)."""

    source: str
    dest: str
    kind: str
    count: int


class MethodRef(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Where a method is: ``id`` (its chunk id without a part suffix, ``<path>::<Name>[@n]``),
    ``path``, ``name``, ``owner``, ``module_kind``, ``kind`` (procedure or function), ``export``,
    its 1-based ``start_line``..``end_line`` (doc comment included) and the name's LSP range."""

    id: str
    path: str
    name: str
    owner: str = ""
    module_kind: str = ""
    kind: str = ""
    export: bool = False
    start_line: int = 1
    end_line: int = 1
    name_range: tuple[int, int, int, int] = (0, 0, 0, 0)


class _RefFreshness(msgspec.Struct, kw_only=True):
    """What may be missing from a references answer: ``resolving`` files whose references
    are not resolved yet (right after a first index or a load: seconds), ``building`` (the
    references are being read from the files again, after an upgrade or a damaged snapshot
    part: files not read yet are missing), and the freshness fields of
    :class:`SearchResult` (files changed on disk and not indexed yet)."""

    resolving: int = 0
    building: bool = False
    stale: bool = False
    stale_paths: list[str] = []
    stale_count: int = 0
    pending_count: int = 0
    full_reconcile_pending: bool = False
    unread_events: bool = False
    stale_reason: str | None = None


class References(_RefFreshness, kw_only=True):
    """``references``: who references the methods a name, a method id or a position stands for.

    ``targets``: those methods (at most :data:`MAX_REF_TARGETS`; ``targets_total`` counts them),
    ``site``: the call or string under the position, when one was asked for; ``references``:
    every target's references merged, by path and position, at most ``limit``; ``possible``:
    unresolved sites with a target's name (on request); ``counts`` and ``total`` over all of
    them; ``truncated``: more than listed; ``lower_bound``: the configuration runs computed code
    (``Выполнить``/``Вычислить``), which may call a target too. ``callers``: with ``locate``,
    where each listed caller method is."""

    query: str = ""
    targets: list[MethodRef] = []
    targets_total: int = 0
    site: Reference | None = None
    references: list[Reference] = []
    possible: list[Reference] = []
    counts: RefCounts = msgspec.field(default_factory=RefCounts)
    total: int = 0
    truncated: bool = False
    lower_bound: bool = False
    callers: dict[str, MethodRef] = {}


class Callees(_RefFreshness, kw_only=True):
    """``callees``: what one method references, in file order, resolved or not (``target`` /
    ``reason`` on each); ``targets``: where each resolved callee is (with ``locate``)."""

    method: MethodRef
    references: list[Reference] = []
    targets: dict[str, MethodRef] = {}


class CallGraph(_RefFreshness, kw_only=True):
    """A bounded walk from ``start`` (a method id): ``direction`` ``callers`` or ``callees``;
    ``nodes`` with their depth (the start has 0); ``edges``; ``truncated`` when a fan-out cap
    or the depth cut something; ``revisited``: edges to a node already reached (recursion,
    mutual calls, two paths to one method), which the walk does not expand again. Bindings and
    module-level code are leaves. ``starts``: the other methods the name stood for (the walk
    starts from the first); ``methods``: where each method node is (filled by the daemon);
    ``possible``: unresolved calls with the start's name (a chained ``А.Б().В()``, a call through
    a variable), counted as :class:`RefCounts` ``.possible`` is and not walked."""

    start: str
    direction: str
    nodes: dict[str, int]
    edges: list[GraphEdge]
    truncated: bool = False
    revisited: int = 0
    starts: list[str] = []
    lower_bound: bool = False
    methods: dict[str, MethodRef] = {}
    possible: int = 0


class Definition(msgspec.Struct, kw_only=True, omit_defaults=True):
    """``definition`` at a position: the call or string naming a method there (``site``) and
    what it resolves to (``targets``: one method, or none with ``site.reason``), and the method
    whose header or body holds the position (``method``)."""

    site: Reference | None = None
    targets: list[MethodRef] = []
    method: MethodRef | None = None
    resolving: int = 0
