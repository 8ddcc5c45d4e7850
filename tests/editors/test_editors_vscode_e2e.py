"""End to end in a real VS Code: the packaged extension (.vsix) runs in code-server (VS Code's
server and web build, from the npm registry) and headless Chromium drives the workbench.

What it does, as a user would:

1. ``npm run package`` builds the .vsix from ``editors/vscode`` (into tmp), and
   ``code-server --install-extension`` installs it into a fresh extensions dir.
2. code-server serves a copy of the bundled sample export on 127.0.0.1 (no auth, telemetry,
   update check, gallery or workspace trust), with user settings that start the language
   server with this interpreter (``bslLens.pythonPath``), lexical only (``bslLens.embedder:
   none``), no watcher, and the index in tmp.
3. Chromium (Debian's, started by Playwright with ``executable_path``; no browser download)
   opens the folder. Every request the page makes to a host other than 127.0.0.1 is
   aborted and listed in the failure message.
4. Checked on the screen (the workbench DOM), with a screenshot of each step:
   the extension activated (the status bar item reads ``bsl-lens: ready``);
   Go to Symbol in Workspace (``Ctrl+T``) for the CamelHump ``ЗагрКурсВал`` lists
   ``ЗагрузитьКурсыВалют`` with its module, and Enter opens the module at it;
   the "Search 1C by meaning" QuickPick for ``загрузить курсы валют`` lists the method;
   the Extensions view shows the extension's page with its README.

Screenshots go to ``$BSL_LENS_ARTIFACTS/vscode`` (default ``tests/artifacts/vscode``, ignored
by git); the test prints the folder. Teardown ends code-server's whole process group (the
extension host and the language server are in it), closes Chromium, and stops the daemon
the server started; it checks that no process of the group is left.

Needs: code-server (``BSL_LENS_CODE_SERVER``: the folder of an installed ``code-server`` npm
package; ``.ci/run`` installs 4.100.3 — the last release for Node 20 — into
``~/.cache/bsl-lens-ci``), ``chromium`` (Debian), the ``playwright`` Python package (test
extra) and ``editors/vscode/node_modules`` (``npm ci``). Skipped when one is missing, except
under CI (``CI=true``), where a missing piece fails the test.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

import pytest
from daemon_helpers import REPO, wait_until

CODE_SERVER_VERSION = "4.100.3"
CODE_SERVER = Path(
    os.environ.get(
        "BSL_LENS_CODE_SERVER",
        Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
        / "bsl-lens-ci"
        / f"code-server-{CODE_SERVER_VERSION}",
    )
)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
NODE = shutil.which("node")
NPM = shutil.which("npm")
EXTENSION = REPO / "editors" / "vscode"
ARTIFACTS = Path(os.environ.get("BSL_LENS_ARTIFACTS", REPO / "tests" / "artifacts")) / "vscode"
MODULE = "CommonModules/РегламентныеЗаданияДемо/Ext/Module.bsl"
METHOD = "ЗагрузитьКурсыВалют"
CAMELHUMP = "ЗагрКурсВал"
MEANING = "загрузить курсы валют"
DISPLAY_NAME = json.loads((EXTENSION / "package.json").read_text(encoding="utf-8"))["displayName"]
#: Seconds one step in the workbench may take (first index of the sample included).
STEP = 120.0
#: Chromium switches: no GPU, no sandbox (root in CI), nothing fetched in the background.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-features=Translate,MediaRouter,OptimizationHints",
]


def _missing() -> str | None:
    entry = CODE_SERVER / "out" / "node" / "entry.js"
    if not entry.is_file():
        return f"code-server not installed at {CODE_SERVER} (set BSL_LENS_CODE_SERVER; .ci/run installs it)"
    if not (CODE_SERVER / "lib" / "vscode" / "node_modules").is_dir():
        return f"code-server at {CODE_SERVER} has no lib/vscode/node_modules (its postinstall did not run)"
    if CHROMIUM is None:
        return "chromium not installed (apt-get install chromium; .ci/run does)"
    if NODE is None or NPM is None:
        return "node/npm not on PATH"
    if not (EXTENSION / "node_modules").is_dir():
        return "editors/vscode/node_modules missing (cd editors/vscode && npm ci)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright Python package is not installed (pip install -e '.[test]')"
    return None


MISSING = _missing()
IN_CI = os.environ.get("CI") == "true"
# skipped without its tools, except under CI, where the test fails with the reason instead
pytestmark = pytest.mark.skipif(MISSING is not None and not IN_CI, reason=MISSING or "")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def package_vsix(out: Path) -> Path:
    """``npm run package`` into ``out`` (the extension as a user installs it)."""
    proc = subprocess.run(
        [NPM, "run", "package", "--", "--out", str(out)],
        cwd=EXTENSION,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0 and out.is_file(), (proc.stdout[-3000:], proc.stderr[-3000:])
    return out


def code_server_cmd(*args: str) -> list[str]:
    return [NODE, str(CODE_SERVER / "out" / "node" / "entry.js"), *args]


def user_settings(index_dir: Path) -> dict:
    """VS Code user settings: the extension's server from this interpreter, lexical only;
    the workbench quiet (no telemetry, gallery checks, welcome page or trust prompt)."""
    return {
        "bslLens.pythonPath": sys.executable,
        "bslLens.embedder": "none",
        "bslLens.watch": "off",
        "bslLens.indexDir": str(index_dir),
        "bslLens.statusInterval": 1,
        "bslLens.logLevel": "debug",
        "telemetry.telemetryLevel": "off",
        "update.mode": "none",
        "extensions.autoCheckUpdates": False,
        "extensions.autoUpdate": False,
        "extensions.ignoreRecommendations": True,
        "workbench.enableExperiments": False,
        "workbench.startupEditor": "none",
        "workbench.tips.enabled": False,
        "security.workspace.trust.enabled": False,
        "window.commandCenter": False,
        "chat.disableAIFeatures": True,
        "workbench.colorTheme": "Default Light Modern",
        "editor.minimap.enabled": False,
    }


class CodeServer:
    """One code-server process (its own process group) serving ``folder`` on 127.0.0.1."""

    def __init__(self, tmp: Path, folder: Path, index_dir: Path, vsix: Path):
        self.tmp = tmp
        self.port = free_port()
        self.user_data = tmp / "cs-user-data"
        self.extensions = tmp / "cs-extensions"
        (self.user_data / "User").mkdir(parents=True)
        (self.user_data / "User" / "settings.json").write_text(
            json.dumps(user_settings(index_dir), indent=2, ensure_ascii=False), encoding="utf-8"
        )
        self.env = {
            **os.environ,
            "PYTHONPATH": str(REPO),  # the language server imports this checkout
            "XDG_CONFIG_HOME": str(tmp / "xdg-config"),  # code-server's config.yaml stays in tmp
            "XDG_DATA_HOME": str(tmp / "xdg-data"),
            # no extension gallery: nothing is fetched from outside
            "EXTENSIONS_GALLERY": json.dumps({"serviceUrl": f"http://127.0.0.1:{free_port()}/gallery"}),
        }
        self.common = ["--user-data-dir", str(self.user_data), "--extensions-dir", str(self.extensions)]
        proc = subprocess.run(
            code_server_cmd(*self.common, "--install-extension", str(vsix)),
            env=self.env,
            capture_output=True,
            text=True,
            timeout=180,
            stdin=subprocess.DEVNULL,
        )
        assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
        self.installed = proc.stdout
        self.log = (tmp / "code-server.log").open("w")
        self.proc = subprocess.Popen(
            code_server_cmd(
                *self.common,
                "--bind-addr", f"127.0.0.1:{self.port}",
                "--auth", "none",
                "--disable-telemetry",
                "--disable-update-check",
                "--disable-workspace-trust",
                "--disable-getting-started-override",
                "--disable-proxy",
                "--ignore-last-opened",
                str(folder),
            ),
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its extension host and the language server share the group
        )
        self.pgid = self.proc.pid
        what = f"code-server on 127.0.0.1:{self.port} ({tmp / 'code-server.log'})"
        wait_until(self._healthy, timeout=STEP, what=what)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def _healthy(self) -> bool:
        assert self.proc.poll() is None, f"code-server exited {self.proc.returncode}: {self.log_text()[-3000:]}"
        try:
            with urllib.request.urlopen(self.url + "healthz", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def log_text(self) -> str:
        self.log.flush()
        return (self.tmp / "code-server.log").read_text(encoding="utf-8", errors="replace")

    def group_alive(self) -> bool:
        try:
            os.killpg(self.pgid, 0)
        except ProcessLookupError:
            return False
        return True

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL what is left after 15 s; wait for all of it."""
        for sig, wait in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(self.pgid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                if self.proc.poll() is not None and not self.group_alive():
                    break
                time.sleep(0.1)
        self.proc.wait(timeout=10)
        self.log.close()


def quick_rows(page) -> list[str]:
    """The visible rows of the open Quick Input list, as text (label, description, detail)."""
    return page.locator(".quick-input-widget .quick-input-list .monaco-list-row").all_inner_texts()


def wait_rows(page, want: str, what: str) -> list[str]:
    rows: list[str] = []

    def found() -> bool:
        nonlocal rows
        rows = quick_rows(page)
        return any(want in r for r in rows)

    try:
        wait_until(found, timeout=STEP, what=what)
    except AssertionError as e:
        raise AssertionError(f"{e}; rows: {rows}") from None
    return rows


@pytest.mark.long
def test_vscode_extension_in_code_server(tmp_path, sample_root, daemons):
    if MISSING:
        pytest.fail(f"CI=true but {MISSING}")
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for old in ARTIFACTS.glob("*.png"):
        old.unlink()
    print(f"\nscreenshots: {ARTIFACTS}")
    vsix = package_vsix(tmp_path / "bsl-lens.vsix")
    index_dir = tmp_path / "idx"
    blocked: list[str] = []
    server = CodeServer(tmp_path, sample_root, index_dir, vsix)
    try:
        assert "successfully installed" in server.installed, server.installed
        version = json.loads((EXTENSION / "package.json").read_text(encoding="utf-8"))["version"]
        assert (server.extensions / f"bsl-lens.bsl-lens-{version}" / "dist" / "extension.js").is_file()
        with sync_playwright() as pw:
            context = pw.chromium.launch_persistent_context(
                str(tmp_path / "chromium-profile"),
                executable_path=CHROMIUM,
                headless=True,
                args=CHROMIUM_ARGS,
                viewport={"width": 1400, "height": 900},
                locale="ru-RU",
            )
            try:

                def only_loopback(route):
                    host = urlparse(route.request.url).hostname
                    if route.request.url.startswith(("data:", "blob:")) or host == "127.0.0.1":
                        route.continue_()
                    else:
                        blocked.append(route.request.url)
                        route.abort()

                context.route("**/*", only_loopback)
                page = context.pages[0] if context.pages else context.new_page()
                page.goto(server.url + "?folder=" + str(sample_root), wait_until="domcontentloaded")
                page.locator(".monaco-workbench .part.statusbar").wait_for(timeout=STEP * 1000)

                # 1. activation: the status bar item of the extension reads "ready"
                item = page.locator(".statusbar-item", has_text="bsl-lens")
                item.first.wait_for(timeout=STEP * 1000)
                wait_until(
                    lambda: "bsl-lens: ready" in item.first.inner_text(),
                    timeout=STEP,
                    what=f"the status bar item to read 'bsl-lens: ready' (reads {item.first.inner_text()!r})",
                )
                # its tooltip: the folder's counts from the daemon
                item.first.hover()
                hover = page.locator(".workbench-hover, .monaco-hover").filter(has_text="68 methods")
                hover.first.wait_for(timeout=STEP * 1000)
                shown = hover.first.inner_text()
                assert "export: ready: 32 files, 68 methods, up to date" in shown, shown
                page.screenshot(path=str(ARTIFACTS / "1-status-bar-ready.png"))
                page.mouse.move(700, 400)

                # 2. Go to Symbol in Workspace by CamelHump
                page.locator(".monaco-workbench").click(position={"x": 700, "y": 400})
                page.keyboard.press("Control+t")
                box = page.locator(".quick-input-widget .quick-input-box input")
                box.wait_for(timeout=STEP * 1000)
                assert box.input_value().startswith("#"), box.input_value()
                box.fill("#" + CAMELHUMP)
                rows = wait_rows(page, METHOD, f"Go to Symbol for {CAMELHUMP!r} to list {METHOD}")
                page.screenshot(path=str(ARTIFACTS / "2-go-to-symbol-camelhump.png"))
                first = rows[0]
                assert METHOD in first and "РегламентныеЗаданияДемо" in first, rows
                page.keyboard.press("Enter")
                tab = page.locator(".tabs-container .tab.active")
                wait_until(lambda: "Module.bsl" in tab.inner_text(), timeout=STEP, what="the module to open")
                crumbs = page.locator(".breadcrumbs-control").first
                wait_until(
                    lambda: "РегламентныеЗаданияДемо" in crumbs.inner_text(),
                    timeout=STEP,
                    what=f"the breadcrumbs to show the module's folder ({crumbs.inner_text()!r})",
                )
                wait_until(
                    lambda: any(METHOD in t for t in page.locator(".editor-instance .view-line").all_inner_texts()),
                    timeout=STEP,
                    what=f"{METHOD} on the editor's screen",
                )
                page.screenshot(path=str(ARTIFACTS / "3-module-opened-at-method.png"))

                # 3. Search 1C by meaning (the extension's QuickPick)
                page.keyboard.press("F1")
                box.wait_for(timeout=STEP * 1000)
                box.fill(">Search 1C by meaning")
                wait_rows(page, "Search 1C by meaning", "the command in the palette")
                page.keyboard.press("Enter")
                title = page.locator(".quick-input-widget .quick-input-title")
                wait_until(
                    lambda: "search 1C by meaning" in (title.inner_text() if title.count() else ""),
                    timeout=STEP,
                    what="the Search 1C by meaning QuickPick",
                )
                box.fill(MEANING)
                rows = wait_rows(page, METHOD, f"Search 1C by meaning for {MEANING!r} to list {METHOD}")
                page.screenshot(path=str(ARTIFACTS / "4-search-by-meaning.png"))
                assert not any("Search failed" in r or "not running" in r for r in rows), rows
                hit = next(r for r in rows if METHOD in r)
                assert "РегламентныеЗаданияДемо" in hit, rows
                page.keyboard.press("Escape")

                # 4. the Extensions view shows the extension's README (editors/vscode/README.md)
                page.keyboard.press("Control+Shift+x")
                entry = page.locator(".extensions-viewlet .monaco-list-row", has_text=DISPLAY_NAME)
                entry.first.wait_for(timeout=STEP * 1000)
                entry.first.click()
                readme = None

                def readme_shown() -> bool:
                    nonlocal readme
                    for frame in page.frames:
                        try:
                            if frame.locator("h2", has_text="Requirements").count():
                                readme = frame
                                return True
                        except Exception:  # a frame navigating away
                            continue
                    return False

                wait_until(readme_shown, timeout=STEP, what="the extension's README in its details page")
                text = readme.locator("body").inner_text()
                assert "bsl-lens installed" in text and "bslLens.pythonPath" in text, text[:500]
                page.screenshot(path=str(ARTIFACTS / "5-extension-readme.png"))
            finally:
                context.close()
    finally:
        log = server.log_text()
        server.stop()
        daemons.adopt(sample_root, index_dir)  # the language server spawned it; teardown stops it
        (ARTIFACTS / "code-server.log").write_text(log, encoding="utf-8")
    assert not server.group_alive(), "a process of code-server's group survived"
    assert not blocked, f"the page tried to reach hosts other than 127.0.0.1: {blocked[:10]}"
