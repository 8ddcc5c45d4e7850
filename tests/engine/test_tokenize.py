"""The tokenizer (daemon/text/tokenize.py) on the real ssl31-ru code. The rules on literal snippets are
in tests/unit/text/test_tokenize.py."""

from __future__ import annotations

import os

import pytest

from daemon.text.tokenize import clear_caches, tokenize


def _module_texts(root):
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            if name.endswith(".bsl"):
                with open(os.path.join(dirpath, name), encoding="utf-8-sig") as fh:
                    yield fh.read()


@pytest.mark.slow
def test_whole_ssl31_ru_is_fast_and_finds_query_texts(ssl_ru):
    """All 1,926 modules (~36 M characters): a few seconds cold, and the query-text
    reference ``Справочник.Пользователи`` is found as a pair token."""
    texts = list(_module_texts(ssl_ru))
    assert len(texts) > 1900
    clear_caches()
    n_tokens = 0
    pair_hits = 0
    for text in texts:
        toks = tokenize(text)
        n_tokens += len(toks)
        pair_hits += toks.count("справочник.пользователи")
    clear_caches()
    assert n_tokens > 5_000_000
    assert pair_hits > 50
