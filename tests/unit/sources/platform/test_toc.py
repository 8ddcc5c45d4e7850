"""The brace-format table of contents of a help book."""

from __future__ import annotations

import pytest

import hbk_fixtures as hf
from daemon.sources.platform.toc import MAX_DEPTH, TocError, parse_braces, parse_toc


def test_braces_strings_numbers_and_doubled_quotes():
    text = '\ufeff{2,\n{1,"a ""b"" c",{},{"x",{"y"}}},\n-7}'
    assert parse_braces(text) == ["2", ["1", 'a "b" c', [], ["x", ["y"]]], "-7"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{1,"open', "unterminated string"),
        ("{1,{2}", "left open"),
        ("{1}}", "unmatched"),
        ("", "no brace list"),
        ("   7", "no brace list"),
        ("{" * (MAX_DEPTH + 2) + "}" * (MAX_DEPTH + 2), "deeper than"),
    ],
)
def test_brace_errors_are_named(text, message):
    with pytest.raises(TocError, match=message):
        parse_braces(text)


def test_tree_from_the_builder():
    nodes = [
        hf.Node(1, 0, {"ru": "Глобальный контекст", "en": "Global context"}, "/objects/Global context.html", [2]),
        hf.Node(2, 1, {"ru": "Свойства", "en": "Properties"}, "", [3]),
        hf.Node(3, 2, {"#": "Справочники"}, '/objects/Global context/properties/"q".html'),
        hf.Node(4, 0, {"ru": "Прочее"}, "/objects/catalog1.html"),
    ]
    toc = parse_toc(hf.toc_text(nodes))
    assert toc.roots == [1, 4] and toc.skipped == 0
    assert toc.nodes[1].children == [2] and toc.nodes[2].children == [3]
    assert toc.nodes[3].title("ru") == "Справочники"  # a "#" title stands in for any language
    assert toc.nodes[3].path == '/objects/Global context/properties/"q".html'
    assert toc.nodes[1].title("en") == "Global context"
    assert [(n.id, d) for n, d in toc.walk()] == [(1, 0), (2, 1), (3, 2), (4, 0)]
    assert [n.id for n, _ in toc.walk(1)] == [2, 3]


def test_chunks_of_another_shape_are_counted_not_fatal():
    text = '{4,\n{1,0,0,{1,0,{0,0,{"ru","A"}},"/a.html"}},\n{x,0,0,{}},\n"stray",\n{2,1,1,{1,0,{0,0},"/b.html"}}}'
    toc = parse_toc(text)
    assert list(toc.nodes) == [1] and toc.skipped == 3


def test_walk_survives_cycles_and_self_parents():
    text = '{3,{1,2,0,{1,0,{0,0,{"ru","A"}},"/a"}},{2,1,0,{1,0,{0,0,{"ru","B"}},"/b"}},{3,3,0,{1,0,{0,0},"/c"}}}'
    toc = parse_toc(text)
    assert toc.roots == [3]  # 1 and 2 are each other's parent: reachable from no root, never looped over
    assert [n.id for n, _ in toc.walk()] == [3]
