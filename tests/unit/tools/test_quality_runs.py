"""tools/quality_runs.py's fan-in helpers on the bundled sample export: the reference graph read
from the files for an index that holds none equals the index's own, and the index-time fan-in
term lands on the names channel's boosts of the methods other files call."""

from __future__ import annotations

import importlib.util
import math
import shutil
from pathlib import Path

from daemon.engine import Engine

REPO = Path(__file__).resolve().parents[3]


def _load():
    spec = importlib.util.spec_from_file_location("quality_runs", REPO / "tools" / "quality_runs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_references_filled_for_an_index_without_them_and_the_names_fanin_term(sample_root, tmp_path):
    q = _load()
    idx = tmp_path / "idx"
    built = Engine.open(sample_root, index_dir=idx, embedder=None)
    built.refresh()
    built.save()
    built.resolve_references()
    graph = built.state.refs
    q.fill_references(built, sample_root)
    assert built.state.refs is graph  # a complete graph is kept, not read again

    bare = tmp_path / "bare"
    shutil.copytree(idx, bare)
    gen = (bare / "lexical" / "CURRENT").read_text().strip()
    (bare / "lexical" / gen / "refs.bin").unlink()  # an index from before references were kept
    eng = Engine.open(sample_root, index_dir=bare, embedder=None)
    assert not eng.state.refs_complete and len(eng.state.refs) == 0
    q.fill_references(eng, sample_root)
    eng.resolve_references()
    assert eng.state.refs_complete and eng.state.refs.state() == graph.state()

    st = eng.state
    slots = [s for s in st.store.live_slots().tolist() if st.store.kind_of(s) in ("procedure", "function")]
    callers = dict(zip(slots, st.fan_in([st.store.ids[s] for s in slots]), strict=True))
    called = [s for s in slots if callers[s]]
    assert called and len(called) < len(slots)  # the sample calls some of its methods across files
    before = {s: st.names.get(s)[3] for s in slots}
    assert q.add_names_fanin(eng, 0.5) == len(called)
    for s in slots:
        assert math.isclose(st.names.get(s)[3], before[s] + 0.5 * math.log1p(callers[s]))
