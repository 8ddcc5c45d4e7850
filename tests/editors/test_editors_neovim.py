"""End to end with a real editor client: headless Neovim (Debian's package; 0.7+) runs the
shipped config ``editors/neovim/bsl-lens.lua`` against a copy of the bundled sample export.

Neovim starts ``python -m lsp`` itself (the config's ``cmd``), the server spawns the
folder's daemon (lexical, index dir in tmp; adopted by the ``daemons`` fixture so teardown
stops it), and ``workspace/symbol`` is asked by exact name and by CamelHump abbreviation.
The locations Neovim received are checked against the module text: the right file, and a
range that covers the method's name on its declaration line.

Then the config's commands run from buffers that have no client attached — the quickfix
window and a scratch buffer — with a second export open beside the first (two clients, two
daemons): ``:BslLensStatus`` must list both folders as ready, ``:BslLensReindex`` must
reach both servers, and ``:BslLensSearch`` must go to the server whose root holds the
current file (the second export's module) or, from a scratch buffer, to the first one.
Before the commands found their server by root they asked the current buffer's clients:
none, so each waited 10 s and said "no bsl-lens client answered".

Skipped when ``nvim`` is not installed (``.ci/run`` installs Debian's ``neovim``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from daemon_helpers import REPO, copy_sample

NVIM = shutil.which("nvim")
CONFIG = REPO / "editors" / "neovim" / "bsl-lens.lua"
SCRIPT = REPO / "tests" / "editors" / "nvim_workspace_symbols.lua"
MODULE = "CommonModules/РегламентныеЗаданияДемо/Ext/Module.bsl"
BANK = "CommonModules/ОбменСБанкомСлужебный/Ext/Module.bsl"
#: search by meaning (lexical daemons: BM25 on the words) and the method it must find
SEARCH = "загрузить курсы валют"
SEARCH_HIT = (MODULE, "ЗагрузитьКурсыВалют")
#: query -> the methods (module, name) that must be the first results, in any order
QUERIES = {
    "ЗагрузитьКурсыВалют": [(MODULE, "ЗагрузитьКурсыВалют")],
    "ЗагрКурсВал": [(MODULE, "ЗагрузитьКурсыВалют")],
    "РазобрСтрВып": [(BANK, "РазобратьСтрокиВыписки"), (BANK, "РазобратьСтрокуВыписки")],
}

pytestmark = pytest.mark.skipif(NVIM is None, reason="nvim not installed (apt-get install neovim; .ci/run does)")


def fs_path(uri: str) -> Path:
    return Path(unquote(urlparse(uri).path))


def run_nvim(root: Path, index_dir: Path, root2: Path, index_dir2: Path, tmp: Path) -> dict:
    out = tmp / "nvim-result.json"
    index_dirs = {str(root): str(index_dir), str(root2): str(index_dir2)}
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "E2E_CONFIG": str(CONFIG),
        "E2E_CMD": json.dumps([sys.executable, "-m", "lsp"]),
        "E2E_INIT": json.dumps({"indexDir": index_dirs, "embedder": "none", "watch": "off"}),
        "E2E_FILE": str(root / MODULE),
        "E2E_FILE2": str(root2 / BANK),
        "E2E_SEARCH": SEARCH,
        "E2E_QUERIES": json.dumps(list(QUERIES), ensure_ascii=False),
        "E2E_OUT": str(out),
        "XDG_STATE_HOME": str(tmp / "nvim-state"),  # Neovim's lsp.log (0.8+) stays in tmp
    }
    cmd = [NVIM, "--headless", "-u", "NONE", "-i", "NONE", "-n", "-c", f"luafile {SCRIPT}"]
    proc = subprocess.run(cmd, env=env, cwd=root, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert out.is_file(), f"nvim wrote no result (exit {proc.returncode}): {proc.stdout[-2000:]} {proc.stderr[-2000:]}"
    return json.loads(out.read_text(encoding="utf-8"))


def test_neovim_workspace_symbols(tmp_path, sample_root, daemons):
    index_dir = tmp_path / "idx"
    root2 = copy_sample(tmp_path / "export2")
    index_dir2 = tmp_path / "idx2"
    try:
        res = run_nvim(sample_root, index_dir, root2, index_dir2, tmp_path)
    finally:
        daemons.adopt(sample_root, index_dir)  # the servers spawned them; stop them at teardown
        daemons.adopt(root2, index_dir2)
    assert res["ok"], res.get("error")
    assert res["client"] == "bsl-lens"
    assert res["filetype"] == "bsl"
    assert Path(res["root"]).resolve() == sample_root.resolve()  # the folder with Configuration.xml
    assert Path(res["index_dir"]).resolve() == index_dir.resolve()

    for got in res["results"]:
        q = got["query"]
        assert not got.get("error"), (q, got["error"])
        symbols = got["result"] or []
        assert symbols, f"no symbols for {q!r}"
        want = QUERIES[q]
        top = {s["name"] for s in symbols[: len(want)]}
        assert top == {name for _, name in want}, (q, [s["name"] for s in symbols[:5]])
        found = {}
        for s in symbols:
            loc = s["location"]
            path = fs_path(loc["uri"])
            assert path.is_relative_to(sample_root), (q, loc["uri"])
            found.setdefault((path.relative_to(sample_root).as_posix(), s["name"]), loc)
        for rel, name in QUERIES[q]:
            loc = found.get((rel, name))
            assert loc is not None, f"{q!r}: {name} in {rel} not among {sorted(found)}"
            rng = loc["range"]
            assert rng["start"]["line"] == rng["end"]["line"]
            lines = (sample_root / rel).read_bytes().decode("utf-8-sig").splitlines()
            line = lines[rng["start"]["line"]]
            # the sample is all BMP text: UTF-16 columns are str indices
            assert line[rng["start"]["character"] : rng["end"]["character"]] == name, (q, line, rng)
            assert "Функция" in line or "Процедура" in line, line

    assert "no bsl-lens server is running" in res["status_before_any"], res["status_before_any"]
    cmds = res["commands"]
    assert [Path(r).resolve() for r in cmds["clients"]] == [sample_root.resolve(), root2.resolve()]

    # :BslLensStatus from the quickfix window: both servers answered, both folders ready
    assert cmds["status_from"]["buftype"] == "quickfix"
    assert "no bsl-lens" not in cmds["status_text"], cmds["status_text"]
    lines = [ln for ln in cmds["status_text"].splitlines() if ln.strip()]
    assert len(lines) == 2, lines
    for root, line in zip((sample_root, root2), lines, strict=True):
        assert f"({root}): ready; daemon ready, 32 files, 68 methods" in line, line
    folders = cmds["status"]["folders"]
    assert sorted(Path(f["path"]).resolve() for f in folders) == sorted([sample_root.resolve(), root2.resolve()])
    assert {Path(f["indexDir"]).resolve() for f in folders} == {index_dir.resolve(), index_dir2.resolve()}

    # :BslLensReindex from the quickfix window reaches both servers
    assert cmds["reindex"]["from"] == "quickfix"
    notes = [n["msg"] for n in cmds["reindex"]["notes"]]
    assert len(notes) == 1, notes
    for root in (sample_root, root2):
        assert f"re-checking 1 folder(s) of {root} by content hash" in notes[0], notes

    def search_hits(got: dict, root: Path) -> set:
        assert got["done"], f"no quickfix list from :BslLensSearch ({got['notes']})"
        assert got["title"] == f"bsl-lens: {SEARCH}"
        paths = {Path(it["filename"]).resolve() for it in got["items"]}
        assert paths and all(p.is_relative_to(root.resolve()) for p in paths), (root, sorted(paths))
        base = root.resolve()
        return {(Path(it["filename"]).resolve().relative_to(base).as_posix(), it["text"]) for it in got["items"]}

    def has_hit(hits: set) -> bool:
        rel, name = SEARCH_HIT
        return any(p == rel and f".{name} " in text for p, text in hits)

    # from the second export's module: its own server (hits under root2)
    got = cmds["search_from_second"]
    assert got["from"]["buftype"] == "" and Path(got["from"]["name"]).resolve() == (root2 / BANK).resolve()
    assert has_hit(search_hits(got, root2))
    # from a scratch buffer: no file, so the first server (hits under the first root)
    got = cmds["search_from_scratch"]
    assert got["from"] == {"buftype": "nofile", "name": ""}
    assert has_hit(search_hits(got, sample_root))


# ------------------------------------------------------------------------------ find usages
USAGES = Path(__file__).with_name("nvim_find_usages.lua")
VAT = "CommonModules/РасчетНДС/Ext/Module.bsl"
SALE = "Documents/РеализацияТоваров/Ext/ObjectModule.bsl"
TAB = "РассчитатьНДСВТабличнойЧасти"


def _position(root: Path, rel: str, needle: str, offset: int = 2) -> dict:
    """``{uri, line, character}`` inside the first ``needle`` of a module (UTF-16 column)."""
    lines = (root / rel).read_bytes().decode("utf-8-sig").splitlines()
    row = next(i for i, t in enumerate(lines) if needle in t)
    col = len(lines[row][: lines[row].index(needle) + offset].encode("utf-16-le")) // 2
    return {"uri": (root / rel).as_uri(), "line": row, "character": col}


def test_neovim_find_usages(tmp_path, sample_root, daemons):
    """Neovim's own client asks for references, definition and the call hierarchy; its own
    handlers fill the quickfix list with the references and jump to the definition."""
    index_dir = tmp_path / "idx"
    decl = _position(sample_root, VAT, f"Процедура {TAB}", len("Процедура ") + 3)
    call = _position(sample_root, SALE, f"РасчетНДС.{TAB}", len("РасчетНДС.") + 3)
    cases = {
        "references": decl,
        "definition": call,
        "hierarchy": _position(sample_root, SALE, "ПересчитатьСуммыТоваров()"),
    }
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "E2E_CONFIG": str(CONFIG),
        "E2E_CMD": json.dumps([sys.executable, "-m", "lsp"]),
        "E2E_INIT": json.dumps({"indexDir": str(index_dir), "embedder": "none", "watch": "off"}),
        "E2E_FILE": str(sample_root / SALE),
        "E2E_CASES": json.dumps(cases, ensure_ascii=False),
        "E2E_OUT": str(tmp_path / "usages.json"),
        "XDG_STATE_HOME": str(tmp_path / "nvim-state"),
    }
    cmd = [NVIM, "--headless", "-u", "NONE", "-i", "NONE", "-n", "-c", f"luafile {USAGES}"]
    try:
        proc = subprocess.run(
            cmd, env=env, cwd=sample_root, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
        )
    finally:
        daemons.adopt(sample_root, index_dir)
    out = tmp_path / "usages.json"
    assert out.is_file(), f"nvim wrote no result (exit {proc.returncode}): {proc.stdout[-2000:]} {proc.stderr[-2000:]}"
    res = json.loads(out.read_text(encoding="utf-8"))
    assert res["ok"], res.get("error")
    got = res["got"]
    assert got["capabilities"]["references"] and got["capabilities"]["call_hierarchy"]
    call_line = (sample_root / SALE).read_bytes().decode("utf-8-sig").splitlines()[call["line"]]
    call_col = len(call_line[: call_line.index(TAB)].encode("utf-16-le")) // 2
    refs = {
        (
            fs_path(r["uri"]).relative_to(sample_root).as_posix(),
            r["range"]["start"]["line"],
            r["range"]["start"]["character"],
        )
        for r in got["references"]["result"]
    }
    assert (SALE, call["line"], call_col) in refs, refs
    # the definition of the call: the declaration's name range
    (loc,) = got["definition"]["result"]
    assert fs_path(loc["uri"]).relative_to(sample_root).as_posix() == VAT
    vat_line = (sample_root / VAT).read_bytes().decode("utf-8-sig").splitlines()[loc["range"]["start"]["line"]]
    assert vat_line[loc["range"]["start"]["character"] : loc["range"]["end"]["character"]] == TAB
    # the call hierarchy of ПересчитатьСуммыТоваров: called in its module, calls РассчитатьНДСВТабличнойЧасти
    (item,) = got["prepare"]["result"]
    assert item["name"] == "ПересчитатьСуммыТоваров"
    assert any(c["from"]["name"] and c["fromRanges"] for c in got["incoming"]["result"])
    assert TAB in {c["to"]["name"] for c in got["outgoing"]["result"]}
    # Neovim's handlers: the quickfix list holds the call (1-based line, byte column) and the jump lands
    qf = {(Path(q["file"]).resolve().relative_to(sample_root.resolve()).as_posix(), q["lnum"]) for q in got["qflist"]}
    assert (SALE, call["line"] + 1) in qf, got["qflist"]
    jump = got["jump"]
    assert Path(jump["file"]).resolve() == (sample_root / VAT).resolve()
    assert jump["line"] == loc["range"]["start"]["line"] + 1
