"""End to end with a real editor client: headless Neovim (Debian's package; 0.7+) runs the
shipped config ``editors/neovim/bsl-lens.lua`` against a copy of the bundled sample export.

Neovim starts ``python -m lsp`` itself (the config's ``cmd``), the server spawns the
folder's daemon (lexical, index dir in tmp; adopted by the ``daemons`` fixture so teardown
stops it), and ``workspace/symbol`` is asked by exact name and by CamelHump abbreviation.
The locations Neovim received are checked against the module text: the right file, and a
range that covers the method's name on its declaration line.

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
from daemon_helpers import REPO

NVIM = shutil.which("nvim")
CONFIG = REPO / "editors" / "neovim" / "bsl-lens.lua"
SCRIPT = REPO / "tests" / "editors" / "nvim_workspace_symbols.lua"
MODULE = "CommonModules/РегламентныеЗаданияДемо/Ext/Module.bsl"
BANK = "CommonModules/ОбменСБанкомСлужебный/Ext/Module.bsl"
#: query -> the methods (module, name) that must be the first results, in any order
QUERIES = {
    "ЗагрузитьКурсыВалют": [(MODULE, "ЗагрузитьКурсыВалют")],
    "ЗагрКурсВал": [(MODULE, "ЗагрузитьКурсыВалют")],
    "РазобрСтрВып": [(BANK, "РазобратьСтрокиВыписки"), (BANK, "РазобратьСтрокуВыписки")],
}

pytestmark = pytest.mark.skipif(NVIM is None, reason="nvim not installed (apt-get install neovim; .ci/run does)")


def fs_path(uri: str) -> Path:
    return Path(unquote(urlparse(uri).path))


def run_nvim(root: Path, index_dir: Path, tmp: Path) -> dict:
    out = tmp / "nvim-result.json"
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "E2E_CONFIG": str(CONFIG),
        "E2E_CMD": json.dumps([sys.executable, "-m", "lsp"]),
        "E2E_INIT": json.dumps({"indexDir": str(index_dir), "embedder": "none", "watch": "off"}),
        "E2E_FILE": str(root / MODULE),
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
    try:
        res = run_nvim(sample_root, index_dir, tmp_path)
    finally:
        daemons.adopt(sample_root, index_dir)  # the server spawned it; stop it at teardown
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
            assert ("Функция" in line or "Процедура" in line), line
