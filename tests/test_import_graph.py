"""The import graph of daemon/, lsp/ and mcp_bridge/: the layers of ARCHITECTURE.md, in order.

Every import counts: top-level, inside a function, under ``if TYPE_CHECKING:``. A module may
import its own layer and the layers below it, never one above; and the graph has no cycles.
Built from the source with ``ast``, so nothing is imported to check it.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("daemon", "lsp", "mcp_bridge")

#: The layers, bottom first. A module belongs to the longest prefix that names it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("daemon", "daemon.contract", "daemon.stats", "daemon.options"),  # the shared vocabulary
    ("daemon.text",),  # folding, tokenizer, lexicon
    ("daemon.sources",),  # scan, file decoding, BSL, metadata, markdown, docs
    ("daemon.index",),  # chunk store, channels, embedding cache, reconcile, snapshot
    ("daemon.ranking",),  # cues, params, fusion, ranker
    ("daemon.engine",),  # the facade over index and ranking
    ("daemon.service",),  # one root kept fresh: threads, watcher, freshness, lookups
    ("daemon.server",),  # the daemon process: protocol, socket server, runtime files
    ("daemon.client",),  # clients of the daemon: connect, spawn, supervise
    ("lsp", "mcp_bridge"),  # the front ends
    ("daemon.dev",),  # benches and evaluation
    ("daemon.cli",),  # the command line, on top of everything
)

#: What the front ends may import of the daemon package (they load none of the engine). Packages
#: count as their face: ``daemon.contract`` and ``daemon.client``, never a module inside them.
FRONT_END_ALLOWED = (
    "daemon",
    "daemon.contract",
    "daemon.options",
    "daemon.stats",
    "daemon.client",
    "daemon.server.protocol",
    "daemon.server.runtime",
    "daemon.notes",
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _files() -> dict[str, Path]:
    return {
        _module_name(p): p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py") if "sample_export" not in p.parts
    }


def _imports(path: Path, name: str, known: set[str]) -> dict[str, int]:
    """``{module of the package: first line}`` for every import in ``path`` (any depth)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out: dict[str, int] = {}

    def add(target: str, line: int) -> None:
        while target and target not in known:  # `from daemon.server import runtime` -> that module, else the package
            target = target.rsplit(".", 1)[0] if "." in target else ""
        if target and target != name:
            out.setdefault(target, line)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                add(a.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for a in node.names:
                add(f"{mod}.{a.name}", node.lineno)
    return out


def _graph() -> dict[str, dict[str, int]]:
    files = _files()
    known = set(files)
    return {name: _imports(path, name, known) for name, path in files.items()}


def layer_of(module: str) -> int:
    """The index in :data:`LAYERS` of ``module``; ``ValueError`` for a module no layer names."""
    best: tuple[int, int] | None = None
    for i, group in enumerate(LAYERS):
        for prefix in group:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[1]):
                best = (i, len(prefix))
    if best is None:
        raise ValueError(f"{module} is in no layer of tests/test_import_graph.py")
    return best[0]


def _cycle(graph: dict[str, dict[str, int]] | dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m) :] + [m]
            if m not in state:
                found = dfs(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = dfs(n)
            if found:
                return found
    return None


def test_every_module_is_in_a_layer():
    for name in _graph():
        layer_of(name)


def test_imports_point_down_the_layers():
    graph = _graph()
    assert "daemon.contract" in graph["daemon.server.protocol"] and "daemon.client" in graph["lsp.server"]
    up = [
        f"{name}:{line} imports {dep} (layer {LAYERS[layer_of(dep)][0]} is above {LAYERS[layer_of(name)][0]})"
        for name, deps in sorted(graph.items())
        for dep, line in sorted(deps.items())
        if layer_of(dep) > layer_of(name)
    ]
    assert not up, "\n".join(up)


def test_no_import_cycles():
    graph = _graph()
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_front_ends_load_none_of_the_engine():
    for name, deps in _graph().items():
        if name.startswith(("lsp", "mcp_bridge")):
            bad = [d for d in deps if d.startswith("daemon") and d not in FRONT_END_ALLOWED]
            assert not bad, f"{name} imports {bad}"


def test_the_contract_is_imported_through_its_package_face():
    # daemon/contract/ is one home with one face (its __init__ re-exports every public name)
    inside = [
        f"{name} imports {dep}"
        for name, deps in _graph().items()
        if not name.startswith("daemon.contract")
        for dep in deps
        if dep.startswith("daemon.contract.")
    ]
    assert not inside, "\n".join(inside)


def test_the_checks_can_fail():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
    assert layer_of("daemon.cli.main") > layer_of("daemon.engine") > layer_of("daemon.index.bm25")
    assert layer_of("daemon.ranking.fusion") > layer_of("daemon.index.reconcile")
