"""The grammar queries on corpus modules, and the equivalence of the chunker's fast tree walk with
``methods.scm`` on them. The tests on inline sources are in tests/unit/sources/test_grammar_queries.py."""

from __future__ import annotations

import pytest

from daemon.sources import bsl, bsl_lines
from unit.sources.test_grammar_queries import captures  # one parse-and-capture helper for both tiers


def test_tree_walk_equals_methods_query(ssl_ru, yaxunit):
    """The chunker walks only root/preprocessor/ERROR children for speed; on real modules
    (a huge one, one with ERROR nodes) it must find exactly the definitions the query finds."""
    for p in (
        ssl_ru / "CommonModules/ОбщегоНазначения/Ext/Module.bsl",
        ssl_ru / "CommonModules/ОбщегоНазначенияКлиент/Ext/Module.bsl",
        yaxunit / "exts/smoke/src/CommonModules/ДТОткрытиеФорм/Module.bsl",
        yaxunit / "exts/yaxunit/src/Configuration/ManagedApplicationModule.bsl",
    ):
        text = bsl_lines.normalize(p.read_bytes().decode("utf-8"))
        data = text.encode("utf-8")
        walked = {(n.start_byte, n.end_byte) for _, _, n in bsl._tree_methods(data).values()}
        # the plain walk (used for clean trees) must agree with the query on these files too
        stack, plain = [bsl.parser().parse(data).root_node], set()
        while stack:
            for n in stack.pop().children:
                if n.type in bsl._METHOD_TYPES:
                    plain.add((n.start_byte, n.end_byte))
                elif n.type in bsl._CONTAINER_TYPES:
                    stack.append(n)
        c = captures("methods", text)
        queried = {(n.start_byte, n.end_byte) for n in c["method"]}
        assert walked == queried == plain, p
        assert walked


@pytest.mark.parametrize("name", ["methods", "regions", "annotations", "comments"])
def test_queries_run_on_a_corpus_module(ssl_en, name):
    text = (ssl_en / "Catalogs/Users/Forms/ItemForm/Ext/Form/Module.bsl").read_bytes().decode("utf-8")
    c = captures(name, bsl_lines.normalize(text))
    assert sum(len(v) for v in c.values()) > 10
