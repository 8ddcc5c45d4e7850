"""The VS Code extension's manifest against the server (no VS Code needed; ``.ci/run``
type-checks, bundles and packages the extension itself with npm).

* every setting the extension sends as ``initializationOptions`` is one the server reads
  (``lsp.settings.Settings`` wire names), and is contributed in ``package.json`` with the
  server's default;
* the extension lives beside other BSL extensions: no ``languages`` / ``grammars``
  contribution, files selected by pattern;
* the server commands it calls are the ones the server registers.
"""

from __future__ import annotations

import json
import re

import msgspec
from daemon_helpers import REPO

from lsp import commands, search
from lsp.settings import Settings

VSCODE = REPO / "editors" / "vscode"
PKG = json.loads((VSCODE / "package.json").read_text(encoding="utf-8"))
CONFIG_TS = (VSCODE / "src" / "config.ts").read_text(encoding="utf-8")
EXTENSION_TS = (VSCODE / "src" / "extension.ts").read_text(encoding="utf-8")


def sent_keys() -> set[str]:
    block = CONFIG_TS.split("const globalSettings", 1)[1].split("};", 1)[0]
    return (
        set(re.findall(r"^\s*(\w+):", block, re.M))
        | set(re.findall(r"push\(\{ workspace: [^,]+, (\w+) \}", CONFIG_TS))
        | set(re.findall(r"globalSettings\.(\w+) =", CONFIG_TS))
    )

#: Settings whose empty VS Code default means "unset" (the server's own rule applies).
UNSET_WHEN_EMPTY = {"indexDir", "embedder"}


def test_sent_settings_are_server_settings():
    wire = set(Settings.__struct_encode_fields__)
    sent = sent_keys()
    assert {"embedder", "watch", "maxSymbols", "indexDir"} <= sent
    assert sent <= wire, sent - wire
    props = PKG["contributes"]["configuration"]["properties"]
    defaults = msgspec.to_builtins(Settings())
    for key in sent:
        prop = props[f"bslLens.{key}"]
        if key in UNSET_WHEN_EMPTY:  # "" in VS Code means unset
            assert prop["default"] == "" and defaults[key] is None, key
        else:
            assert prop["default"] == defaults[key], key
    # every setting that changes the server restarts it
    restart = set(re.findall(r'"(\w+)"', CONFIG_TS.split("RESTART_KEYS = [", 1)[1].split("]", 1)[0]))
    assert sent | {"serverCommand", "pythonPath"} <= restart


def test_coexists_with_other_bsl_extensions():
    contributes = PKG["contributes"]
    assert "languages" not in contributes and "grammars" not in contributes
    assert "onLanguage:bsl" in PKG["activationEvents"]
    assert "workspaceContains:Configuration.xml" in PKG["activationEvents"]
    assert '{ scheme: "file", pattern: "**/*.bsl" }' in EXTENSION_TS
    titles = {c["title"] for c in contributes["commands"]}
    assert titles == {"Search 1C by meaning", "Show index status", "Reindex", "Restart server"}


def test_server_names_match():
    assert commands.STATUS_COMMAND in EXTENSION_TS and commands.REINDEX_COMMAND in EXTENSION_TS
    assert f'"{search.SEARCH_REQUEST}"' in (VSCODE / "src" / "search.ts").read_text(encoding="utf-8")


def test_package_has_readme_and_no_placeholder_repository():
    """The .vsix carries README.md (the Extensions view and the Marketplace page show it);
    no made-up repository URL — packaging says ``--allow-missing-repository`` instead."""
    readme = (VSCODE / "README.md").read_text(encoding="utf-8")
    for needed in ("## Requirements", "bsl-lens installed", "## Commands", "## Settings", "Search 1C by meaning"):
        assert needed in readme, needed
    props = PKG["contributes"]["configuration"]["properties"]
    for key in props:
        assert f"`{key}`" in readme, f"{key} missing from editors/vscode/README.md"
    for cmd in PKG["contributes"]["commands"]:
        assert cmd["title"] in readme and cmd["command"] in readme, cmd
    assert "README.md" not in (VSCODE / ".vscodeignore").read_text(encoding="utf-8")
    # vsce cannot rewrite relative links without a repository: the README has none
    assert not re.search(r"\]\((?!https?://|#)", readme), "relative link in the README"
    assert "repository" not in PKG
    assert "--allow-missing-repository" in PKG["scripts"]["package"]


def test_every_install_script_is_reviewed():
    """Every locked package with an install script has an ``allowScripts`` entry, and
    ``.npmrc`` makes an unreviewed one fail ``npm ci`` (npm 11.16+)."""
    lock = json.loads((VSCODE / "package-lock.json").read_text(encoding="utf-8"))
    with_scripts = {
        p.rsplit("node_modules/", 1)[1] for p, e in lock["packages"].items() if p and e.get("hasInstallScript")
    }
    assert with_scripts, "the lockfile lists no package with install scripts (esbuild has one)"
    allowed = {k.rsplit("@", 1)[0] if k.rfind("@") > 0 else k for k in PKG["allowScripts"]}
    assert with_scripts <= allowed, with_scripts - allowed
    npmrc = (VSCODE / ".npmrc").read_text(encoding="utf-8")
    assert re.search(r"^strict-allow-scripts\s*=\s*true\s*$", npmrc, re.M), npmrc
