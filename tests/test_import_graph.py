"""The import graph of daemon/, lsp/ and mcp_bridge/ at module import time has no cycles.

Only top-level imports count (what runs when a module is imported); an import inside a
function is a deliberate late binding and is not an edge. Built from the source with
``ast``, so nothing is imported to check it.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("daemon", "lsp", "mcp_bridge")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, name: str, known: set[str], *, everywhere: bool = False) -> set[str]:
    """The package modules ``name`` imports at import time (``everywhere``: also inside
    functions)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out: set[str] = set()

    def add(target: str) -> None:
        while target and target not in known:  # `from daemon import runtime` -> daemon.server.runtime, else daemon
            target = target.rsplit(".", 1)[0] if "." in target else ""
        if target and target != name:
            out.add(target)

    def visit(body) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                for a in node.names:
                    add(a.name)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                for a in node.names:
                    add(f"{mod}.{a.name}")
            elif isinstance(node, ast.If):  # `if TYPE_CHECKING:` blocks do not run
                test = node.test
                if not (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"):
                    visit(node.body)
                    visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for h in node.handlers:
                    visit(h.body)

    visit(list(ast.walk(tree)) if everywhere else tree.body)
    return out


def _graph(*, everywhere: bool = False) -> dict[str, set[str]]:
    files = {_module_name(p): p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py") if "sample_export" not in p.parts}
    known = set(files)
    return {name: _imports(path, name, known, everywhere=everywhere) for name, path in files.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
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


def test_no_import_cycles():
    graph = _graph()
    assert "daemon.engine" in graph and "lsp.server" in graph and "mcp_bridge.server" in graph
    assert "daemon.contract" in graph["daemon.server.protocol"] and "daemon.client" in graph["lsp.server"]
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_front_ends_and_benches_do_not_import_the_cli():
    # Not even inside a function: the CLI is the shell over the daemon package, not a library.
    graph = _graph(everywhere=True)
    assert "daemon.engine" in graph["daemon.dev.bench"]
    for name, deps in graph.items():
        if name.startswith(("lsp", "mcp_bridge", "daemon.dev.bench")):
            assert "daemon.cli.main" not in deps, name
