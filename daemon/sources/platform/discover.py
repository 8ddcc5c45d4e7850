"""Where the installed platforms' help books are, which versions they are, and which one a
configuration targets.

Install layouts (one folder per platform version):

* Windows: ``C:\\Program Files\\1cv8\\8.3.NN.BBBB\\bin\\*.hbk`` and the same under
  ``Program Files (x86)`` (found through ``ProgramW6432``, ``ProgramFiles``,
  ``ProgramFiles(x86)``, defaulting to the standard folders);
* Linux: ``/opt/1cv8/x86_64/8.3.NN.BBBB/*.hbk`` (also ``i386``, ``aarch64``), and the older
  ``/opt/1C/v8.3/x86_64/*.hbk`` with no version in the path (its version is
  :data:`UNKNOWN` unless a path component names one).

:func:`find_help` returns ``{version: [files]}`` from explicit paths (``--platform-help
DIR|FILE``, repeatable; they win over the standard folders for the same version and book)
and the standard folders. :func:`read_compatibility_mode` reads a configuration's
``CompatibilityMode`` (Designer ``Configuration.xml``: ``Version8_3_24``; EDT
``Configuration.mdo``: ``8.3.24``), and :func:`nearest_version` picks the installed version
for it: **the lowest installed version at or above the mode, else the highest installed**
(code written for 8.3.24 runs on 8.3.24 and later, and the lowest of those documents what
the code may call without promising what later versions added; when every installed version
is older, the newest is the closest).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = [
    "BOOKS",
    "UNKNOWN",
    "find_help",
    "mode_version",
    "nearest_version",
    "parse_version",
    "read_compatibility_mode",
    "standard_roots",
    "version_key",
]

#: The help books platform help reads (the language reference and the language itself).
BOOKS = ("shcntx_ru.hbk", "shcntx_en.hbk", "shlang_ru.hbk", "shlang_en.hbk")
#: The version of books found where no path component names one.
UNKNOWN = "unknown"

_VERSION_DIR = re.compile(r"^\d+\.\d+\.\d+(?:\.\d+)?$")
_MODE_RE = re.compile(r"^(?:Version)?(\d+)[._](\d+)(?:[._](\d+))?(?:[._](\d+))?$", re.I)
_TAGS = (
    re.compile(rb"<(?:\w+:)?CompatibilityMode>\s*([^<\s]+)\s*</"),  # Designer Configuration.xml
    re.compile(rb"<compatibilityMode>\s*([^<\s]+)\s*</compatibilityMode>"),  # EDT Configuration.mdo
)
_EXTENSION_TAGS = (
    re.compile(rb"<(?:\w+:)?ConfigurationExtensionCompatibilityMode>\s*([^<\s]+)\s*</"),
    re.compile(rb"<configurationExtensionCompatibilityMode>\s*([^<\s]+)\s*</configurationExtensionCompatibilityMode>"),
)
#: Bytes of a configuration descriptor read for its mode (it is among the first properties).
_HEAD_BYTES = 8 << 20


def parse_version(text: str) -> tuple[int, ...] | None:
    """``"8.3.24.1467"`` -> ``(8, 3, 24, 1467)``; ``None`` for anything that is not two to
    four dot-separated numbers."""
    parts = text.strip().split(".")
    if not 2 <= len(parts) <= 4 or not all(p.isdigit() for p in parts):
        return None
    return tuple(int(p) for p in parts)


def version_key(version: str) -> tuple[int, ...]:
    """Sort key: versions by their numbers, anything unparsable (:data:`UNKNOWN`) first."""
    parsed = parse_version(version)
    return (1, *parsed) if parsed else (0,)


def mode_version(mode: str | None) -> tuple[int, ...] | None:
    """The version a compatibility mode names: ``Version8_3_24`` and ``8.3.24`` ->
    ``(8, 3, 24)``; ``None`` for ``DontUse``, empty or unknown values."""
    if not mode:
        return None
    m = _MODE_RE.match(mode.strip())
    if not m:
        return None
    return tuple(int(g) for g in m.groups() if g is not None)


def standard_roots(system: str | None = None, env: Mapping[str, str] | None = None) -> list[Path]:
    """The folders that hold one sub-folder per installed platform version on this system
    (``system``: ``"win32"`` or another ``sys.platform`` value, for tests)."""
    system = system or sys.platform
    env = os.environ if env is None else env
    if system.startswith("win"):
        bases = [env.get(v) for v in ("ProgramW6432", "ProgramFiles", "ProgramFiles(x86)")]
        bases += ["C:\\Program Files", "C:\\Program Files (x86)"]
        out: list[Path] = []
        for base in bases:
            if base and Path(base, "1cv8") not in out:
                out.append(Path(base, "1cv8"))
        return out
    return [
        Path("/opt/1cv8/x86_64"),
        Path("/opt/1cv8/i386"),
        Path("/opt/1cv8/aarch64"),
        Path("/opt/1C/v8.3/x86_64"),
        Path("/opt/1C/v8.3/i386"),
    ]


def _version_of(path: Path) -> str:
    """The version a path names in one of its components (nearest first), else UNKNOWN."""
    for part in reversed(path.parts):
        if _VERSION_DIR.match(part):
            return part
    return UNKNOWN


def _books_in(folder: Path, books: tuple[str, ...] | None) -> list[Path]:
    """``*.hbk`` files directly in ``folder`` or its ``bin`` (only ``books`` when given)."""
    out: list[Path] = []
    for where in (folder, folder / "bin"):
        try:
            items = sorted(where.iterdir())
        except OSError:
            continue
        for f in items:
            if f.suffix.lower() == ".hbk" and (books is None or f.name.lower() in books) and f.is_file():
                out.append(f)
    return out


def _subfolders(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.is_dir())
    except OSError:
        return []


def find_help(
    paths: Iterable[Path | str] = (),
    *,
    roots: Iterable[Path | str] | None = None,
    books: Iterable[str] | None = BOOKS,
) -> dict[str, list[Path]]:
    """``{version: [help book files]}``, versions in ascending order, files by name.

    ``paths`` are the explicit ``--platform-help`` values: a file is taken as is (its version
    from its path); a folder is taken as a version folder when it (or its ``bin``) holds
    ``.hbk`` files, else as a folder of version folders. ``roots`` replaces
    :func:`standard_roots` (tests; ``[]``: explicit paths only). ``books`` limits the file
    names in scanned folders (``None``: every ``.hbk``); an explicit file is never filtered.
    A version and book found twice keeps the first (explicit paths come first). Missing or
    unreadable folders are passed over."""
    wanted = tuple(b.lower() for b in books) if books is not None else None
    found: dict[str, dict[str, Path]] = {}

    def add(version: str, files: Iterable[Path]) -> None:
        slot = found.setdefault(version, {})
        for f in files:
            slot.setdefault(f.name.lower(), f)

    def scan_root(root: Path) -> None:
        direct = _books_in(root, wanted)
        if direct:
            add(_version_of(root), direct)
        for sub in _subfolders(root):
            if _VERSION_DIR.match(sub.name):
                files = _books_in(sub, wanted)
                if files:
                    add(sub.name, files)

    for raw in paths:
        p = Path(raw)
        if p.is_file():
            add(_version_of(p.parent), [p])
        elif p.is_dir():
            direct = _books_in(p, wanted)
            if direct:
                add(_version_of(p), direct)
            else:
                scan_root(p)
    for root in standard_roots() if roots is None else roots:
        scan_root(Path(root))
    return {
        v: sorted(found[v].values(), key=lambda f: f.name.lower()) for v in sorted(found, key=version_key) if found[v]
    }


def read_compatibility_mode(root: Path | str) -> str | None:
    """The ``CompatibilityMode`` of the configuration at ``root`` (an export root, or the
    descriptor file itself) as written: ``Version8_3_24``, ``8.3.24``, ``DontUse``; ``None``
    when there is no descriptor or no mode. Looks at ``Configuration.xml`` (Designer) and
    ``src/Configuration/Configuration.mdo`` (EDT, also one or two folders down for a
    repository of several projects); a configuration's mode wins over an extension's
    ``ConfigurationExtensionCompatibilityMode``, which is used when no configuration has one."""
    root = Path(root)
    if root.is_file():
        candidates = [root]
    else:
        candidates = [root / "Configuration.xml", root / "src" / "Configuration" / "Configuration.mdo"]
        for pattern in ("*/src/Configuration/Configuration.mdo", "*/*/src/Configuration/Configuration.mdo"):
            candidates.extend(sorted(root.glob(pattern)))
    extension: str | None = None
    for path in candidates:
        try:
            with open(path, "rb") as fh:
                head = fh.read(_HEAD_BYTES)
        except OSError:
            continue
        for rx in _TAGS:
            m = rx.search(head)
            if m:
                return m.group(1).decode("ascii", "replace")
        if extension is None:
            for rx in _EXTENSION_TAGS:
                m = rx.search(head)
                if m:
                    extension = m.group(1).decode("ascii", "replace")
                    break
    return extension


def nearest_version(mode: str | None, installed: Iterable[str]) -> str | None:
    """The installed version for a compatibility mode (the rule is in the module doc):
    the lowest installed version at or above the mode, else the highest installed; the
    highest when the mode is ``DontUse``, missing or unreadable; :data:`UNKNOWN` only when
    nothing else is installed; ``None`` when nothing is."""
    versions = list(installed)
    known = sorted((v for v in versions if parse_version(v)), key=version_key)
    if not known:
        return UNKNOWN if UNKNOWN in versions else (versions[0] if versions else None)
    target = mode_version(mode)
    if target is None:
        return known[-1]
    for v in known:
        parsed = parse_version(v) or ()
        if parsed[: len(target)] >= target:
            return v
    return known[-1]
