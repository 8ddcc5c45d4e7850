"""Scanning an export: which files to index, what each one is, and how to read it.

Two layouts are recognised:

* **Designer** "dump to files": ``Configuration.xml`` at the export root; object
  descriptors ``<Folder>/<Name>.xml``; modules under ``<Folder>/<Name>/Ext/…``;
  configuration modules under ``Ext/``.
* **1C:EDT**: one or more projects, each with ``src/Configuration/Configuration.mdo``;
  descriptors ``src/<Folder>/<Name>/<Name>.mdo`` with the modules beside them (no ``Ext/``).
  A repository may hold several projects (YAxUnit has four).

Folder names are English in both layouts and in both script variants; the owner strings
use the Russian singular type (``ОбщийМодуль.Common`` in the English SSL), as fixed by
:mod:`daemon.contract`.
"""

from __future__ import annotations

import os
import re
import stat
import unicodedata
from collections.abc import Iterable
from pathlib import Path

import logging

import msgspec

import pathspec

from ..contract import Skip

from ..contract import CONFIGURATION, OBJECT_TYPES, SUB_FOLDERS
from ..text.folding import split_words
from .docs import DocsLayout
from .files import (
    ModuleIdentity,
    SkipFile,
    SourceFile,
    UTF8_BOM,
    decode_bytes,
    open_regular,
    read_regular_bytes,
    sniff_binary,
    special_kind,
    unfollowed_link,
)

log = logging.getLogger(__name__)

# ----------------------------------------------------------------------------- structs


class ProjectInfo(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One configuration or extension inside an export.

    * ``path``: project folder relative to the export root, ``""`` for the root itself
      (Designer, or an EDT project opened directly); ``src``: the folder holding the type
      folders (``"exts/yaxunit/src"``; ``""`` for Designer).
    * ``name``: the configuration name (``Configuration.xml`` ``<Name>`` /
      ``Configuration.mdo`` ``<name>``); ``project_name``: the EDT ``.project`` name.
    * ``is_extension`` / ``name_prefix`` / ``purpose``: from ``ConfigurationExtensionPurpose``
      and ``NamePrefix`` (``AddOn`` / ``Customization`` / ``Patch``).
    * ``script_variant``: ``Russian`` / ``English`` when the descriptor says so;
      ``version``: the Designer dump format version (``2.20``).
    """

    path: str
    src: str = ""
    name: str = ""
    project_name: str = ""
    is_extension: bool = False
    name_prefix: str = ""
    purpose: str = ""
    script_variant: str = ""
    version: str = ""


class ExportInfo(msgspec.Struct, kw_only=True):
    """What kind of export a root is: ``format`` is ``"designer"``, ``"edt"`` or ``"unknown"``.

    ``docs``: the documentation folders named for this root (``--docs``; relative, NFC);
    in an ``"unknown"`` root (no configuration) every markdown page is documentation
    anyway (:mod:`daemon.sources.docs`). ``hidden``: the EDT project ``src`` folders the
    root's ``.bsl-lens-ignore`` leaves out (relative, NFC): named so that a root whose every
    project is ignored does not look like an export without a configuration."""

    format: str
    projects: list[ProjectInfo] = []
    docs: list[str] = []
    hidden: list[str] = []


class ScanResult(msgspec.Struct, kw_only=True):
    """Output of :func:`scan_export`; all lists sorted by ``path``.

    ``unreadable_dirs``: folders (relative, NFC, ``""`` for the root itself) whose listing
    failed or stopped part-way (``PermissionError``, ``EIO``, ``ENAMETOOLONG`` …), plus
    entries whose type could not be determined. Their contents are *unknown*, not gone:
    ``modules``/``metadata`` hold only what was listed before the error, so a caller that
    reconciles an index with the scan must keep what it had indexed below these folders
    instead of deleting it. Each one also has a ``Skip(path, "unreadable", detail)`` in
    ``skipped``. (A single file whose ``stat`` failed is only a ``Skip(path, "unreadable")``.)
    """

    info: ExportInfo
    modules: list[SourceFile] = []
    metadata: list[SourceFile] = []
    docs: list[SourceFile] = []  # markdown pages of the docs folders (daemon.sources.docs)
    skipped: list[Skip] = []
    unreadable_dirs: list[str] = []


# ----------------------------------------------------------------------------- identity

_CONFIG_MODULES = {
    "SessionModule.bsl": "session",
    "ManagedApplicationModule.bsl": "managed_application",
    "OrdinaryApplicationModule.bsl": "ordinary_application",
    "ExternalConnectionModule.bsl": "external_connection",
}
_FILE_KINDS = {
    "ObjectModule.bsl": "object",
    "ManagerModule.bsl": "manager",
    "RecordSetModule.bsl": "recordset",
    "ValueManagerModule.bsl": "value_manager",
    "CommandModule.bsl": "command",
}
_MODULE_BSL_KIND = {  # "Module.bsl" directly in an object folder
    "CommonModules": "common",
    "HTTPServices": "http_service",
    "WebServices": "web_service",
    "CommonForms": "form",
}


def _nfc(s: str) -> str:
    return unicodedata.normalize("NFC", s)


def _edt_type_index(parts: list[str]) -> int | None:
    """Index of the type folder in an EDT path: the component after ``src`` that is a known
    type folder or ``Configuration``; or the first component when the root is ``src``."""
    for i, p in enumerate(parts[:-1]):
        if (p in OBJECT_TYPES or p == "Configuration") and (i == 0 or parts[i - 1] == "src"):
            return i
    return None


def module_identity(rel_path: str, fmt: str) -> ModuleIdentity | None:
    """Identity of a ``.bsl`` file from its path (``None`` only for a non-``.bsl`` path).

    ``rel_path`` is relative to the export root (``/`` or ``\\`` separators; normalised to
    NFC). ``fmt`` is ``"designer"`` or ``"edt"`` (``"unknown"`` is treated as Designer with
    an EDT fallback). Layouts:

    * Designer ``CommonModules/X/Ext/Module.bsl`` -> (``ОбщийМодуль.X``, ``ОбщийМодуль``,
      ``common``); ``<Folder>/X/Ext/{Object,Manager,RecordSet,ValueManager}Module.bsl``;
      ``<Folder>/X/Forms/F/Ext/Form/Module.bsl`` -> ``<Тип>.X.Форма.F`` ``form``;
      ``<Folder>/X/Commands/C/Ext/CommandModule.bsl`` -> ``<Тип>.X.Команда.C`` ``command``;
      ``CommonForms/F/Ext/Form/Module.bsl``; ``CommonCommands/C/Ext/CommandModule.bsl``;
      ``HTTPServices``/``WebServices`` ``X/Ext/Module.bsl``; ``Ext/<Kind>Module.bsl`` ->
      ``Конфигурация``.
    * EDT: the same below ``<project>/src/`` without ``Ext/`` (and without ``Form/``):
      ``src/Catalogs/X/Forms/F/Module.bsl``, ``src/Configuration/SessionModule.bsl``.

    Anything else gets ``module_kind`` ``"other"`` with a best-effort owner (the object
    folder if one is recognisable, else ``""``).
    """
    rel = _nfc(rel_path.replace("\\", "/")).strip("/")
    if not rel.lower().endswith(".bsl"):
        return None
    parts = rel.split("/")
    fname = parts[-1]
    if fmt == "edt":
        ident = _edt_identity(parts, fname)
        return ident or ModuleIdentity("", "", "other")
    ident = _designer_identity(parts, fname)
    if ident is None and fmt != "designer":
        ident = _edt_identity(parts, fname)
    return ident or ModuleIdentity("", "", "other")


def _object_identity(parts: list[str], fname: str, tail_ok) -> ModuleIdentity | None:
    """Shared walk for both layouts. ``parts[0]`` is the type folder, ``parts[1]`` the
    object; then (sub-folder, name) pairs; ``tail_ok(rest, kind)`` validates what is left."""
    folder = parts[0]
    if folder not in OBJECT_TYPES or len(parts) < 3:
        return None
    ru = OBJECT_TYPES[folder][0]
    owner = [ru, parts[1]]
    i = 2
    last_sub = None
    while i + 2 < len(parts) and parts[i] in SUB_FOLDERS:
        owner += [SUB_FOLDERS[parts[i]], parts[i + 1]]
        last_sub = parts[i]
        i += 2
    rest = parts[i:]
    if fname in _FILE_KINDS:
        kind = _FILE_KINDS[fname]
    elif fname == "Module.bsl":
        if last_sub == "Forms":
            kind = "form"
        elif last_sub is None:
            kind = _MODULE_BSL_KIND.get(folder, "other")
        else:
            kind = "other"
    else:
        kind = "other"
    if kind != "other" and not tail_ok(rest, kind):
        kind = "other"
    return ModuleIdentity(".".join(owner), ru, kind)


def _designer_identity(parts: list[str], fname: str) -> ModuleIdentity | None:
    if len(parts) == 2 and parts[0] == "Ext":
        kind = _CONFIG_MODULES.get(fname)
        return ModuleIdentity(CONFIGURATION, CONFIGURATION, kind) if kind else None

    def ok(rest: list[str], kind: str) -> bool:
        if kind == "form":
            return rest == ["Ext", "Form", "Module.bsl"]
        return rest == ["Ext", fname]

    return _object_identity(parts, fname, ok)


def _edt_identity(parts: list[str], fname: str) -> ModuleIdentity | None:
    i = _edt_type_index(parts)
    if i is None:
        return None
    sub = parts[i:]
    if sub[0] == "Configuration":
        kind = _CONFIG_MODULES.get(fname) if len(sub) == 2 else None
        return ModuleIdentity(CONFIGURATION, CONFIGURATION, kind or "other")
    return _object_identity(sub, fname, lambda rest, kind: rest == [fname])


# ----------------------------------------------------------------------------- detection

_SKIP_DIRS = {".git", ".bsl-lens", ".hg", ".svn"}

#: The root's ignore file: gitignore patterns (relative to the root) of files and folders that
#: are neither indexed nor watched for changes.
IGNORE_FILE = ".bsl-lens-ignore"


#: Longest ignore file read, in bytes: a bigger one is reported and ignores nothing (every path
#: is matched against every pattern; 100,000 patterns took minutes to apply).
MAX_IGNORE_BYTES = 256 * 1024


class IgnoreRules:
    """The patterns of the root's :data:`IGNORE_FILE` (gitignore syntax, through
    :mod:`pathspec`; no file: nothing is ignored). Paths are relative to the root,
    ``/``-separated, NFC; a folder is asked with a trailing ``/``.

    Read like a module (:func:`daemon.sources.files.read_regular_bytes` and
    :func:`~daemon.sources.files.decode_bytes`: UTF-8 or UTF-16 with a BOM, UTF-8, cp1251; no
    symlink, FIFO or device). ``problems``: :class:`~daemon.contract.Skip` records of the file,
    which the scan reports with its other skips: a file that cannot be read (``unreadable``,
    ``symlink``, ``not_regular``, ``too_large`` over :data:`MAX_IGNORE_BYTES`, ``binary``,
    ``undecodable``) ignores nothing; a line that is no valid pattern (``bad_pattern``) is left
    out and the other lines apply. Never raises."""

    __slots__ = ("spec", "problems")

    def __init__(self, lines: Iterable[str] = (), problems: Iterable[Skip] = ()) -> None:
        lines = [ln for ln in lines if ln.strip()]
        self.spec = pathspec.GitIgnoreSpec.from_lines(lines) if lines else None
        self.problems: list[Skip] = list(problems)

    @classmethod
    def read(cls, root: Path) -> IgnoreRules:
        """The rules of ``root``'s ignore file (none when it is missing)."""
        path = Path(root) / IGNORE_FILE
        if not os.path.lexists(path):
            return cls()
        try:
            text, _ = decode_bytes(read_regular_bytes(path, MAX_IGNORE_BYTES))
        except SkipFile as exc:
            log.warning("%s is not read, nothing is ignored: %s", path, exc.detail)
            return cls(problems=[Skip(IGNORE_FILE, exc.reason, f"{exc.detail}; nothing is ignored")])
        try:
            return cls(text.splitlines())
        except ValueError:  # some line is no pattern: find them (a pattern compiles alone or not at all)
            pass
        lines, problems = [], []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                pathspec.GitIgnoreSpec.from_lines([line])
            except ValueError as exc:
                problems.append(Skip(IGNORE_FILE, "bad_pattern", f"line {n}: {exc}; left out, the other lines apply"))
                continue
            lines.append(line)
        for p in problems:
            log.warning("%s %s", path, p.detail)
        return cls(lines, problems)

    def __bool__(self) -> bool:
        return self.spec is not None

    def ignored(self, rel: str, *, folder: bool = False) -> bool:
        """True if the file (or, with ``folder``, the folder) at ``rel`` is ignored."""
        return self.spec is not None and self.spec.match_file(rel + "/" if folder else rel)


# ----------------------------------------------------------------------------- test code

#: Folder names that hold test code or its fixtures by common convention, at any depth
#: (YAxUnit's ``tests`` project, a demo configuration under ``fixtures/``).
TEST_FOLDERS = frozenset(("tests", "test", "fixtures"))
#: Methods by which a test framework finds a module's tests: a module that declares one is test
#: code (YAxUnit's ``ИсполняемыеСценарии``; ``ПолучитьСписокТестов`` of xUnitFor1C and
#: Vanessa-ADD, ``ЗаполнитьНаборТестов`` of xUnitFor1C).
TEST_REGISTRATION_METHODS = ("ИсполняемыеСценарии", "ПолучитьСписокТестов", "ЗаполнитьНаборТестов")
#: Words of a configuration's or extension's name that make the whole project test code.
_TEST_WORDS = frozenset(("test", "tests", "тест", "тесты", "тестов", "тестирование", "testing"))


def in_test_folder(path: str) -> bool:
    """True if a folder of ``path`` (relative, forward slashes; the file name not counted) is
    one of :data:`TEST_FOLDERS`, case-insensitive."""
    return any(seg.lower() in TEST_FOLDERS for seg in path.split("/")[:-1])


def projects_of_test_code(info: ExportInfo | None) -> tuple[str, ...]:
    """Folders (relative, ``""`` for the root) of the projects that are test code: a
    configuration or extension whose name (or EDT project name) has a word such as ``Tests``
    or ``Тесты`` (``ТестыБСП``, ``tests``). The root project itself never counts."""
    out = []
    for p in info.projects if info is not None else ():
        words = {w.lower() for n in (p.name, p.project_name) for w in split_words(n)}
        if p.path and words & _TEST_WORDS:
            out.append(p.path.rstrip("/") + "/")
    return tuple(out)


def _read_head(path: str, limit: int = 64 * 1024) -> str:
    try:
        fd = open_regular(path)
    except SkipFile:
        return ""
    try:
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(limit)
    except OSError:
        return ""
    if data.startswith(UTF8_BOM):
        data = data[3:]
    return data.decode("utf-8", errors="replace")


def _is_regular(base: str | os.PathLike, *parts: str) -> bool:
    """True when ``base/parts…`` is a regular file reached through real folders: no
    component below ``base`` is a symlink (``lstat`` each)."""
    p = os.fspath(base)
    for i, part in enumerate(parts):
        p = os.path.join(p, part)
        try:
            mode = os.lstat(p).st_mode
        except OSError:
            return False
        if not (stat.S_ISREG(mode) if i == len(parts) - 1 else stat.S_ISDIR(mode)):
            return False
    return True


def _tag(text: str, name: str) -> str:
    m = re.search(rf"<{name}>([^<]*)</{name}>", text)
    return m.group(1).strip() if m else ""


def _designer_project(root: Path) -> ProjectInfo:
    # The properties we need sit in the first few KB (before <ChildObjects>).
    head = _read_head(str(root / "Configuration.xml"))
    props = head.split("<ChildObjects>", 1)[0]
    m = re.search(r'<MetaDataObject\b[^>]*\bversion="([^"]+)"', head)
    purpose = _tag(props, "ConfigurationExtensionPurpose")
    return ProjectInfo(
        path="",
        name=_nfc(_tag(props, "Name")),
        is_extension=bool(purpose),
        name_prefix=_nfc(_tag(props, "NamePrefix")),
        purpose=purpose,
        script_variant=_tag(props, "ScriptVariant"),
        version=m.group(1) if m else "",
    )


def _edt_project(root: Path, rel_src: str) -> ProjectInfo:
    src = root / rel_src if rel_src else root
    # the project folder holds src/ (and .project); when the root *is* a src folder, the
    # project path is still "" (nothing above the root is part of the export)
    proj_dir = src.parent if src.name == "src" else src
    rel_proj = rel_src.rpartition("/")[0] if "/" in rel_src else ""
    head = _read_head(str(src / "Configuration" / "Configuration.mdo"))
    # top-level <name> of the configuration: the first one, before any <languages> block
    purpose = _tag(head, "configurationExtensionPurpose")
    dot_project = _read_head(str(proj_dir / ".project"), 4096)
    pmf = _read_head(str(proj_dir / "DT-INF" / "PROJECT.PMF"), 4096)
    return ProjectInfo(
        path=_nfc(rel_proj),
        src=_nfc(rel_src),
        name=_nfc(_tag(head, "name")),
        project_name=_nfc(_tag(dot_project, "name")),
        is_extension=bool(purpose) or "Base-Project:" in pmf or "<extension " in head.split("<languages", 1)[0],
        name_prefix=_nfc(_tag(head, "namePrefix")),
        purpose=purpose,
        script_variant=_tag(head, "scriptVariant"),
    )


def _find_edt_srcs(root: Path, max_depth: int = 6) -> tuple[list[str], list[str]]:
    """Relative ``src`` folders (``"exts/yaxunit/src"``) holding ``Configuration/Configuration.mdo``:
    ``(found, hidden)``, hidden the ones the root's ignore file leaves out (as far as the
    walk got: an ignored folder is not entered)."""
    found: list[str] = []
    hidden: list[str] = []
    if _is_regular(root, "Configuration", "Configuration.mdo"):
        return [""], []
    ignore = IgnoreRules.read(root)

    def walk(d: str, rel: str, depth: int) -> None:
        try:
            entries = list(os.scandir(d))
        except OSError:
            return
        for e in entries:
            if not e.is_dir(follow_symlinks=False) or e.name in _SKIP_DIRS:
                continue
            sub = f"{rel}/{e.name}" if rel else e.name
            project = e.name == "src" and _is_regular(e.path, "Configuration", "Configuration.mdo")
            if ignore and ignore.ignored(_nfc(sub), folder=True):
                if project:
                    hidden.append(_nfc(sub))
                continue
            if project:
                found.append(sub)
                continue  # a project's src holds no further projects
            if depth < max_depth and not e.name.startswith("."):
                walk(e.path, sub, depth + 1)

    walk(str(root), "", 0)
    return sorted(found), sorted(hidden)


def detect_export(root: Path) -> ExportInfo:
    """Detect the layout of ``root``.

    * ``"designer"``: ``Configuration.xml`` at the root; one project with ``path=""``.
    * ``"edt"``: one or more ``src/Configuration/Configuration.mdo`` below the root (up to
      6 folder levels, hidden folders and ``.git``/``.bsl-lens`` not searched), or
      ``Configuration/Configuration.mdo`` directly in the root (the root is a ``src``);
      projects sorted by path.
    * ``"unknown"``: neither; no projects (the scanner still indexes every ``.bsl``).

    Like the scanner, detection follows no symlink below ``root``: a linked
    ``Configuration.xml`` or ``Configuration`` folder does not count.
    """
    root = Path(root)
    if _is_regular(root, "Configuration.xml"):
        return ExportInfo(format="designer", projects=[_designer_project(root)])
    srcs, hidden = _find_edt_srcs(root)
    if srcs:
        return ExportInfo(format="edt", projects=[_edt_project(root, s) for s in srcs], hidden=hidden)
    return ExportInfo(format="unknown", projects=[], hidden=hidden)


# ----------------------------------------------------------------------------- scanning


def _metadata_identity(parts: list[str]) -> tuple[str, str] | None:
    """(owner, object_type) for a descriptor path below the type folder, or None.

    Designer: ``[Folder, Name.xml]`` and nested subsystems
    ``[Subsystems, A, Subsystems, B.xml]``; EDT: ``[Folder, Name, Name.mdo]`` and
    ``[Subsystems, A, Subsystems, B, B.mdo]``."""
    folder = parts[0]
    if folder not in OBJECT_TYPES:
        return None
    ru = OBJECT_TYPES[folder][0]
    fname = parts[-1]
    if fname.endswith(".xml"):
        names = parts[1:-1] + [fname[:-4]]
    elif fname.endswith(".mdo"):
        if len(parts) < 3 or parts[-2] != fname[:-4]:
            return None
        names = parts[1:-1]
    else:
        return None
    # names: [A] or [A, Subsystems, B, Subsystems, C, ...] (only subsystems nest)
    if len(names) % 2 != 1:
        return None
    owner = [ru, names[0]]
    for k in range(1, len(names), 2):
        if folder != "Subsystems" or names[k] != "Subsystems":
            return None
        owner += [ru, names[k + 1]]
    return ".".join(owner), ru


def scan_export(root: Path, *, max_file_bytes: int = 8 * 2**20, docs: Iterable[str] = ()) -> ScanResult:
    """Walk ``root`` once (``os.scandir``) and classify every file.

    * ``modules``: every ``.bsl`` to index, with its :func:`module_identity`. In EDT exports
      (and in a root where no configuration was found) ``.bsl`` files under a ``.settings``
      folder are EDT code templates, not modules, and are skipped with reason
      ``edt_template``; other ``.bsl``
      outside a project ``src`` are still indexed (kind ``other``).
    * ``metadata``: top-level object descriptors only: Designer ``<Folder>/<Name>.xml`` and
      nested ``Subsystems/A/Subsystems/B.xml``; EDT ``<src>/<Folder>/<Name>/<Name>.mdo``
      (also nested subsystems). Not ``Configuration.xml``/``.mdo``, ``Ext/*.xml``,
      ``Forms/*.xml``, ``Form.xml``, ``Template.xml``, ``Rights.xml`` …; Designer form and
      template descriptors are attached to their owner as ``deps`` (NFC paths, like
      ``path``).
    * ``skipped``: ``too_large`` (size > ``max_file_bytes``), ``binary`` (a ``.bsl`` with a
      NUL in its first 8000 bytes; :func:`read_text` checks the whole file later),
      ``edt_template``; ``ignored_project`` (an EDT project's ``src`` the ignore file hides,
      :attr:`ExportInfo.hidden`); ``symlink`` (a ``.bsl``, a descriptor, a form/template descriptor,
      a docs page, a folder (docs folders' too) that is a symbolic link, or a link that leads
      nowhere: a missing target or a loop; detail: where it points); ``not_regular`` (a
      FIFO, socket or device with such a name; never opened); ``unreadable`` (a folder
      that could not be listed, completely or part-way, also for ``ENAMETOOLONG``, or a
      file whose ``stat`` failed).
    * ``unreadable_dirs``: the folders behind the ``unreadable`` folder skips (``""`` for
      the root); see :class:`ScanResult`: what was indexed below them must be kept.

    Symlinks are never followed, neither to files nor to folders (only ``root`` itself may
    be one); folders named ``.git``, ``.bsl-lens``, ``.hg``, ``.svn`` are not entered, and
    neither are the files and folders the root's ``.bsl-lens-ignore`` matches
    (:class:`IgnoreRules`, gitignore syntax): they are left out without a skip.

    Paths are NFC (:mod:`daemon.contract`); when the name on disk differs (an NFD folder or
    file name), ``SourceFile.disk_path`` holds the on-disk relative path. **Callers must
    open files with** ``SourceFile.fs_path(root)`` (best through :func:`read_regular_bytes`,
    which does not follow a link or block on a FIFO that replaced the file since the scan),
    never ``root / path``. All lists are sorted by path. This never raises for what it
    finds on disk.
    """
    root = Path(root)
    info = detect_export(root)
    info.docs = list(docs)
    return _scan(root, info, [("", True, None)], max_file_bytes)


def scan_paths(
    root: Path,
    info: ExportInfo,
    files: Iterable[str] = (),
    dirs: Iterable[str] = (),
    *,
    max_file_bytes: int = 8 * 2**20,
) -> ScanResult:
    """:func:`scan_export` restricted to some files and folders (the watcher's batches).

    ``files`` and ``dirs`` are relative to ``root`` (NFC or on-disk spelling; ``/`` or
    ``\\``); ``info`` is the :class:`ExportInfo` of the last full scan (a change of
    ``Configuration.xml``/``.mdo`` needs a full scan instead). Each file is classified by
    the same rules as in a full scan by listing its folder; each folder is walked
    recursively. A Designer form or template descriptor (``T/X/Forms/F.xml``) brings in its
    owner descriptor ``T/X.xml``, and a descriptor brings in its ``Forms``/``Templates``
    folders, so ``SourceFile.deps`` is complete. Costs O(listed folders), not O(export).

    Returns a :class:`ScanResult` holding only what lies at the given files or under the
    given folders (plus owner descriptors); a path that does not exist is simply absent.
    """
    root = Path(root)
    fmt = info.format
    want_files: set[str] = set()
    tasks: dict[str, tuple[bool, set[str] | None]] = {}

    def add_dir(rel: str, recursive: bool, name: str | None) -> None:
        """Visit ``rel``: all of it (name None) or just ``name``; merged with earlier visits."""
        prev_rec, prev_names = tasks.get(rel, (False, set()))
        if name is None or prev_names is None:
            names = None
        else:
            names = prev_names | {name}
        tasks[rel] = (recursive or prev_rec, names)

    def add_descriptor(rel: str) -> None:
        want_files.add(rel)
        parent, _, name = rel.rpartition("/")
        add_dir(parent, False, name)
        if fmt == "designer" and rel.endswith(".xml"):
            stem = rel[:-4]
            add_dir(stem + "/Forms", False, None)
            add_dir(stem + "/Templates", False, None)

    for raw in files:
        rel = _nfc(str(raw).replace("\\", "/")).strip("/")
        if not rel:
            continue
        parts = rel.split("/")
        if fmt == "designer" and len(parts) == 4 and parts[0] in OBJECT_TYPES and parts[2] in ("Forms", "Templates"):
            add_descriptor(f"{parts[0]}/{parts[1]}.xml")
            continue
        want_files.add(rel)
        parent, _, name = rel.rpartition("/")
        add_dir(parent, False, name)
        if rel.lower().endswith((".xml", ".mdo")):
            add_descriptor(rel)
    want_dirs = []
    for raw in dirs:
        rel = _nfc(str(raw).replace("\\", "/")).strip("/")
        want_dirs.append(rel)
        add_dir(rel, True, None)
    starts = [(rel, rec, names) for rel, (rec, names) in tasks.items()]
    res = _scan(root, info, starts, max_file_bytes, missing_ok=True)
    prefixes = tuple(d + "/" for d in want_dirs if d)
    everything = "" in want_dirs

    def wanted(path: str) -> bool:
        return everything or path in want_files or (bool(prefixes) and path.startswith(prefixes))

    res.modules = [s for s in res.modules if wanted(s.path)]
    res.metadata = [s for s in res.metadata if wanted(s.path)]
    res.docs = [s for s in res.docs if wanted(s.path)]
    res.skipped = [s for s in res.skipped if wanted(s.path)]
    return res


def _disk_dir(root: Path, rel: str) -> str | None:
    """The on-disk spelling of the folder ``rel`` (NFC), or None if it does not exist.
    Resolves NFD-named components by listing their parent."""
    if not rel:
        return ""
    if os.path.isdir(os.path.join(root, rel)) and not os.path.islink(os.path.join(root, rel)):
        return rel
    cur = ""
    for part in rel.split("/"):
        cand = f"{cur}/{part}" if cur else part
        full = os.path.join(root, cand)
        if not (os.path.isdir(full) and not os.path.islink(full)):
            try:
                names = os.listdir(os.path.join(root, cur) if cur else root)
            except OSError:
                return None
            match = [n for n in names if _nfc(n) == part]
            if not match:
                return None
            cand = f"{cur}/{match[0]}" if cur else match[0]
        cur = cand
    return cur


def _scan(root: Path, info: ExportInfo, starts, max_file_bytes: int, *, missing_ok: bool = False) -> ScanResult:
    """The walk behind :func:`scan_export` and :func:`scan_paths`. ``starts`` is a list of
    ``(relative folder, recursive, names or None)``: a non-recursive start with ``names``
    looks only at those entries of the folder (NFC names). ``missing_ok``: a start folder
    that does not exist (or vanishes) is skipped silently instead of noted unreadable."""
    walk = _Walk(root, info, max_file_bytes)
    stack: list[tuple[str, str, bool, set[str] | None]] = []
    for rel, recursive, names in starts:
        disk = _disk_dir(root, rel) if missing_ok else rel
        if disk is None:
            continue
        if missing_ok and disk and any(p in _SKIP_DIRS for p in disk.split("/")):
            continue
        stack.append((os.path.join(root, disk) if disk else str(root), disk, recursive, names))
    while stack:
        dpath, drel, recursive, only = stack.pop()
        try:
            it = os.scandir(dpath)
        except OSError as exc:
            if missing_ok and isinstance(exc, (FileNotFoundError, NotADirectoryError)):
                continue
            walk.unreadable(_nfc(drel), f"cannot list the folder: {exc}")
            continue
        with it:
            stack.extend(walk.folder(it, drel, recursive, only))
    return walk.result()


class _Walk:
    """What a scan has found so far, and how it classifies one folder entry."""

    def __init__(self, root: Path, info: ExportInfo, max_file_bytes: int) -> None:
        self.info, self.fmt, self.max_bytes = info, info.format, max_file_bytes
        # EDT src folders, longest first (the innermost project wins)
        self.srcs = sorted((p.src for p in info.projects if self.fmt == "edt"), key=len, reverse=True)
        self.src_project = {p.src: p.path for p in info.projects}
        self.modules: list[SourceFile] = []
        self.metadata: list[SourceFile] = []
        self.pages: list[SourceFile] = []
        self.skipped: list[Skip] = []
        self.unreadable_dirs: list[str] = []
        self.deps: dict[str, list[str]] = {}  # descriptor -> its Designer form/template descriptors
        self.docs_layout = DocsLayout(root, info)
        self.ignore = IgnoreRules.read(root)  # the root's .bsl-lens-ignore
        self.skipped.extend(self.ignore.problems)
        why = f"an EDT project's src folder, left out by {IGNORE_FILE}"
        self.skipped.extend(Skip(src, "ignored_project", why) for src in info.hidden)

    def project_of(self, rel: str) -> tuple[str, str] | None:
        """(src prefix, project path) of an EDT path, or None if outside every src."""
        for s in self.srcs:
            if s == "":
                return "", self.src_project[s]
            if rel.startswith(s + "/"):
                return s, self.src_project[s]
        return None

    def unreadable(self, rel: str, detail: str) -> None:
        """Note a folder whose contents are unknown (a skip and an unreadable dir)."""
        self.skipped.append(Skip(rel, "unreadable", detail))
        self.unreadable_dirs.append(rel)

    def folder(self, it, drel: str, recursive: bool, only: set[str] | None) -> list[tuple[str, str, bool, None]]:
        """Classify the entries of one listed folder (``it``, an open ``os.scandir`` at
        ``drel``; ``only``: the NFC names to look at, None for all); returns the sub-folders
        to walk next (when ``recursive``)."""
        subdirs: list[tuple[str, str, bool, None]] = []
        while True:
            try:
                e = next(it)
            except StopIteration:
                break
            except OSError as exc:  # readdir failed part-way (e.g. /proc/1/map_files)
                self.unreadable(_nfc(drel), f"listing the folder failed part-way, its other entries are unknown: {exc}")
                break
            name = e.name
            if only is not None and _nfc(name) not in only:
                continue
            raw_rel = f"{drel}/{name}" if drel else name
            try:
                is_dir = e.is_dir(follow_symlinks=False)
                is_link = not is_dir and e.is_symlink()
                is_file = not is_dir and not is_link and e.is_file(follow_symlinks=False)
            except OSError as exc:  # could be a folder: its contents are unknown
                self.unreadable(_nfc(raw_rel), f"cannot tell what it is: {exc}")
                continue
            if self.ignore and self.ignore.ignored(_nfc(raw_rel), folder=is_dir):
                continue  # .bsl-lens-ignore: neither indexed nor walked
            if is_dir:
                if recursive and name not in _SKIP_DIRS:
                    subdirs.append((e.path, raw_rel, True, None))
                continue
            self.file(e, raw_rel, is_file, is_link)
        return subdirs

    def file(self, e: os.DirEntry, raw_rel: str, is_file: bool, is_link: bool) -> None:
        """Classify one entry that is not a folder (``raw_rel``: its on-disk relative path)."""
        lower = e.name.lower()
        is_bsl = lower.endswith(".bsl")
        code = is_bsl or lower.endswith((".xml", ".mdo"))
        if is_link and not code:
            # a linked folder (in a docs folder too) or a link leading nowhere: named, never followed
            detail = unfollowed_link(e.path)  # stat only, nothing is opened
            if detail is not None:
                self.skipped.append(Skip(_nfc(raw_rel), "symlink", detail))
                return
        docs_dir = self.docs_layout.folder_of(raw_rel)
        if docs_dir is not None and not code:
            self.docs_layout.scan_page(e, _nfc(raw_rel), raw_rel, docs_dir, is_file, is_link, self.pages, self.skipped)
            return
        if not code:
            return
        rel = _nfc(raw_rel)
        disk = raw_rel if raw_rel != rel else ""
        special = None if is_file else special_kind(e, is_link)
        if is_bsl:
            self.bsl(e, rel, disk, special)
        else:
            self.descriptor(e, rel, disk, special)

    def result(self) -> ScanResult:
        """The scan's findings, each list sorted by path, descriptors with their ``deps``."""
        for src in self.metadata:
            d = self.deps.get(src.path)
            if d:
                src.deps = sorted(d)
        self.modules.sort(key=lambda s: s.path)
        self.metadata.sort(key=lambda s: s.path)
        self.pages.sort(key=lambda s: s.path)
        self.skipped.sort(key=lambda s: (s.path, s.reason))
        return ScanResult(
            info=self.info,
            modules=self.modules,
            metadata=self.metadata,
            docs=self.pages,
            skipped=self.skipped,
            unreadable_dirs=sorted(set(self.unreadable_dirs)),
        )

    def _stat(self, e: os.DirEntry, rel: str) -> os.stat_result | None:
        """``e``'s ``lstat``, or None with an ``unreadable`` skip, or with a ``too_large``
        skip when it is over the size cap."""
        try:
            st = e.stat(follow_symlinks=False)
        except OSError as exc:
            self.skipped.append(Skip(rel, "unreadable", str(exc)))
            return None
        if st.st_size > self.max_bytes:
            self.skipped.append(Skip(rel, "too_large", f"{st.st_size} bytes > limit {self.max_bytes}"))
            return None
        return st

    def bsl(self, e: os.DirEntry, rel: str, disk: str, special: tuple[str, str] | None) -> None:
        """A ``.bsl`` file: a module to index, or a skip (EDT template, link, FIFO, too
        large, binary)."""
        project = ""
        if self.fmt != "designer" and ".settings" in rel.split("/")[:-1]:
            # also in a root with no configuration found (an EDT project whose src the
            # ignore file hides): Eclipse's .settings never holds modules
            self.skipped.append(Skip(rel, "edt_template", "EDT code template under .settings/, not a module"))
            return
        if self.fmt == "edt":
            po = self.project_of(rel)
            if po is not None:
                project = po[1]
        if special is not None:
            self.skipped.append(Skip(rel, *special))
            return
        st = self._stat(e, rel)
        if st is None:
            return
        try:
            nul = sniff_binary(e.path)
        except SkipFile as exc:  # replaced by a link / FIFO since it was listed
            self.skipped.append(exc.to_skip(rel))
            return
        if nul >= 0:
            self.skipped.append(Skip(rel, "binary", f"NUL byte at offset {nul}"))
            return
        ident = module_identity(rel, self.fmt) or ModuleIdentity("", "", "other")
        self.modules.append(
            SourceFile(
                path=rel,
                size=st.st_size,
                mtime_ns=st.st_mtime_ns,
                ino=st.st_ino,
                ctime_ns=st.st_ctime_ns,
                owner=ident.owner,
                object_type=ident.object_type,
                module_kind=ident.module_kind,
                project=project,
                disk_path=disk,
            )
        )

    def descriptor(self, e: os.DirEntry, rel: str, disk: str, special: tuple[str, str] | None) -> None:
        """An ``.xml`` / ``.mdo`` file: a top-level object descriptor to index, a Designer
        form or template descriptor (a dependency of its owner's), a skip, or nothing."""
        parts = rel.split("/")
        project = ""
        if self.fmt == "edt":
            po = self.project_of(rel) if rel.endswith(".mdo") else None
            if po is None:
                return
            src, project = po
            sub = parts[len(src.split("/")) :] if src else parts
        elif self.fmt == "designer":
            if not rel.endswith(".xml"):
                return
            sub = parts
            # form / template descriptors feed their owner's chunks
            if len(parts) == 4 and parts[0] in OBJECT_TYPES and parts[2] in ("Forms", "Templates"):
                if special is not None:  # the metadata chunker will not read it either
                    self.skipped.append(Skip(rel, *special))
                    return
                self.deps.setdefault(f"{parts[0]}/{parts[1]}.xml", []).append(rel)
                return
        else:
            return
        ident = _metadata_identity(sub) if len(sub) >= 2 else None
        if ident is None:
            return
        if special is not None:
            self.skipped.append(Skip(rel, *special))
            return
        st = self._stat(e, rel)
        if st is None:
            return
        self.metadata.append(
            SourceFile(
                path=rel,
                size=st.st_size,
                mtime_ns=st.st_mtime_ns,
                ino=st.st_ino,
                ctime_ns=st.st_ctime_ns,
                owner=ident[0],
                object_type=ident[1],
                project=project,
                disk_path=disk,
            )
        )
