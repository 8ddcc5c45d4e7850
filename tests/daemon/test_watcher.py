"""daemon.service.watcher on real temp directories: our inotify binding and watchdog's real
observers.

No file system is mocked. Where a failure must be simulated (inotify limits, a dead reader
thread, a kernel queue overflow) the test makes one call of the inotify binding fail as the
kernel would, or holds its reader, and lets everything else run for real. Every wait is a poll
with a generous deadline.
"""

from __future__ import annotations

import ctypes
import errno
import os
import select
import shutil
import sys
import tempfile
import threading
import time
import unicodedata
from pathlib import Path

import pytest
from daemon_helpers import make_chain, remove_chain

from daemon.service import inotify as I
from daemon.service import watcher as W
from daemon.service.watcher import ChangeBatch, Watcher, is_temp_name

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify-specific")
DEADLINE = 10.0


class Collector:
    """on_batch target: keeps batches, checks on_batch is never re-entered."""

    def __init__(self) -> None:
        self.batches: list[ChangeBatch] = []
        self.lock = threading.Lock()
        self.active = 0
        self.overlapped = False

    def __call__(self, batch: ChangeBatch) -> None:
        with self.lock:
            self.active += 1
            self.overlapped |= self.active > 1
        try:
            self.batches.append(batch)
        finally:
            with self.lock:
                self.active -= 1

    @property
    def paths(self) -> set[str]:
        return set().union(*(b.paths for b in list(self.batches)))

    @property
    def dirs(self) -> set[str]:
        return set().union(*(b.dirs for b in list(self.batches)))

    @property
    def overflow(self) -> bool:
        return any(b.overflow for b in list(self.batches))

    def wait(self, pred, timeout: float = DEADLINE) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if pred():
                return True
            time.sleep(0.01)
        return pred()

    def wait_paths(self, *paths: str, timeout: float = DEADLINE) -> None:
        ok = self.wait(lambda: set(paths) <= self.paths, timeout)
        assert ok, f"missing {set(paths) - self.paths}; got {self.paths}"


def wait_until(pred, timeout: float = DEADLINE) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.01)
    return pred()


@pytest.fixture
def export(tmp_path: Path) -> Path:
    """A small Designer-like export with a .git folder."""
    root = tmp_path / "export"
    for rel, text in {
        "Configuration.xml": "<cfg/>",
        "CommonModules/Общий.xml": "<m/>",
        "CommonModules/Общий/Ext/Module.bsl": "Процедура А() КонецПроцедуры",
        "Catalogs/Товары.xml": "<c/>",
        "Catalogs/Товары/Ext/ObjectModule.bsl": "Процедура Б() КонецПроцедуры",
        "Catalogs/Товары/Forms/Форма/Ext/Form/Module.bsl": "&НаКлиенте\nПроцедура В() КонецПроцедуры",
        ".git/HEAD": "ref: refs/heads/main",
    }.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def make_watcher():
    started: list[Watcher] = []

    def make(root: Path, cb, **kw) -> Watcher:
        w = Watcher(root, cb, **kw)
        started.append(w)
        w.start()
        return w

    yield make
    for w in started:
        w.stop()


def atomic_save(path: Path, text: str, tmp_name: str) -> None:
    tmp = path.with_name(tmp_name)
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


# ---------------------------------------------------------------- native events


def test_modify_create_delete(export: Path, make_watcher) -> None:
    c = Collector()
    w = make_watcher(export, c)
    assert w.mode == "native" and w.degraded is None
    (export / "CommonModules/Общий/Ext/Module.bsl").write_text("// changed", encoding="utf-8")
    c.wait_paths("CommonModules/Общий/Ext/Module.bsl")
    (export / "CommonModules/Новый.xml").write_text("<m/>", encoding="utf-8")
    c.wait_paths("CommonModules/Новый.xml")
    (export / "Catalogs/Товары/Ext/ObjectModule.bsl").unlink()
    c.wait_paths("Catalogs/Товары/Ext/ObjectModule.bsl")
    b = c.batches[0]
    assert b.events >= 1 and b.first_event <= b.last_event and not b.overflow
    assert not c.overlapped
    assert wait_until(lambda: w.pending == 0)


def test_atomic_save_twice_reports_the_real_path(export: Path, make_watcher) -> None:
    c = Collector()
    make_watcher(export, c)
    target = export / "CommonModules/Общий/Ext/Module.bsl"
    atomic_save(target, "// save 1", "Module.bsl.tmp")  # write tmp, rename over
    c.wait_paths("CommonModules/Общий/Ext/Module.bsl")
    n = len(c.batches)
    atomic_save(target, "// save 2", ".Module.bsl.swp")  # vim-like swap name
    assert c.wait(lambda: len(c.batches) > n and "CommonModules/Общий/Ext/Module.bsl" in c.batches[-1].paths)
    assert c.paths == {"CommonModules/Общий/Ext/Module.bsl"}  # never the temp names
    assert target.read_text(encoding="utf-8") == "// save 2"


def test_rename_module_reports_both_ends(export: Path, make_watcher) -> None:
    c = Collector()
    make_watcher(export, c)
    os.rename(export / "CommonModules/Общий.xml", export / "CommonModules/Общий2.xml")
    c.wait_paths("CommonModules/Общий.xml", "CommonModules/Общий2.xml")
    # backup-by-rename (X -> X~): only the real end is reported
    os.rename(export / "Catalogs/Товары.xml", export / "Catalogs/Товары.xml~")
    c.wait_paths("Catalogs/Товары.xml")
    assert not any(p.endswith("~") for p in c.paths)


def test_delete_and_rename_object_folder(export: Path, make_watcher) -> None:
    c = Collector()
    make_watcher(export, c)
    os.rename(export / "Catalogs/Товары", export / "Catalogs/Продукты")
    assert c.wait(lambda: {"Catalogs/Товары", "Catalogs/Продукты"} <= c.dirs), c.dirs
    shutil.rmtree(export / "CommonModules/Общий")
    assert c.wait(lambda: "CommonModules/Общий" in c.dirs), c.dirs
    c.wait_paths("CommonModules/Общий/Ext/Module.bsl")
    # a folder created with content
    new = export / "Documents/Заказ/Ext"
    new.mkdir(parents=True)
    (new / "ObjectModule.bsl").write_text("//", encoding="utf-8")
    assert c.wait(lambda: "Documents/Заказ" in c.dirs or "Documents" in c.dirs), c.dirs


def test_a_moved_folder_is_watched_under_its_new_name(export: Path, make_watcher) -> None:
    """Folders moved inside the root, out of it and back in: events below them carry the path
    they have now, and nothing is reported for a folder that left the root."""
    c = Collector()
    w = make_watcher(export, c)

    def since(k: int) -> set[str]:
        return set().union(*(b.paths | b.dirs for b in c.batches[k:]))

    def settled() -> int:
        assert wait_until(lambda: w.pending == 0 and w.caught_up())
        return len(c.batches)

    os.rename(export / "Catalogs/Товары", export / "Catalogs/Продукты")
    assert c.wait(lambda: "Catalogs/Продукты" in c.dirs), c.dirs
    k = settled()
    (export / "Catalogs/Продукты/Forms/Форма/Ext/Form/Module.bsl").write_text("// after the move", encoding="utf-8")
    assert c.wait(lambda: "Catalogs/Продукты/Forms/Форма/Ext/Form/Module.bsl" in since(k)), since(k)
    assert not any(p.startswith("Catalogs/Товары/") for p in since(k))
    k = settled()
    outside = export.parent / "outside"
    os.rename(export / "Catalogs/Продукты", outside)
    assert c.wait(lambda: "Catalogs/Продукты" in since(k)), since(k)
    k = settled()
    (outside / "Ext/ObjectModule.bsl").write_text("// moved away", encoding="utf-8")
    os.rename(outside, export / "Catalogs/Вернулись")
    assert c.wait(lambda: "Catalogs/Вернулись" in since(k)), since(k)
    k = settled()
    (export / "Catalogs/Вернулись/Ext/ObjectModule.bsl").write_text("// back", encoding="utf-8")
    assert c.wait(lambda: "Catalogs/Вернулись/Ext/ObjectModule.bsl" in since(k)), since(k)
    assert all(p.startswith("Catalogs/Вернулись") for p in since(k)), since(k)


@pytest.mark.parametrize("mode", ["auto", "polling"])
def test_ignored_places_produce_nothing(export: Path, make_watcher, mode: str) -> None:
    index = export / "index"  # an index dir inside the root, not a dot-dir
    index.mkdir()
    c = Collector()
    make_watcher(export, c, ignore=[index, export.parent / "elsewhere"], mode=mode, poll_interval_s=0.1)
    mod = export / "CommonModules/Общий/Ext"
    (export / ".git/objects").mkdir()
    (export / ".git/objects/ab.xml").write_text("x")
    (export / ".git/index").write_text("x")
    (export / ".idea").mkdir()
    (export / ".idea/workspace.xml").write_text("x")
    (index / "chunks.xml").write_text("x")
    (index / "sub").mkdir()
    (index / "sub/a.bsl").write_text("x")
    for name in (
        ".#Module.bsl",
        "#Module.bsl#",
        "Module.bsl~",
        "Module.bsl.swp",
        ".Module.bsl.swx",
        "4913",
        "Module.bsl.tmp",
        "Module.bsl.bak",
        "Module.bsl.orig",
        "notes.txt",
        "Form.bin",
    ):
        (mod / name).write_text("x")
        (mod / name).unlink()
    sentinel = export / "CommonModules/Общий/Ext/Module.bsl"
    sentinel.write_text("// sentinel", encoding="utf-8")
    c.wait_paths("CommonModules/Общий/Ext/Module.bsl")
    assert c.paths == {"CommonModules/Общий/Ext/Module.bsl"}
    assert c.dirs == set()


def test_storm_of_2000_writes_arrives_whole_in_few_batches(export: Path, make_watcher) -> None:
    c = Collector()
    w = make_watcher(export, c)
    expected = set()
    for i in range(40):
        (export / f"CommonModules/M{i}/Ext").mkdir(parents=True)
    assert c.wait(lambda: len(c.dirs) >= 40)
    c.batches.clear()
    for i in range(2000):
        rel = f"CommonModules/M{i % 40}/Ext/Module{i}.bsl"
        (export / rel).write_text(f"// {i}\n", encoding="utf-8")
        expected.add(rel)
    assert c.wait(lambda: expected <= c.paths, 30), len(expected - c.paths)
    assert c.paths == expected
    assert len(c.batches) <= 30, [len(b.paths) for b in c.batches]  # not one per file
    assert sum(b.events for b in c.batches) >= 2000
    assert wait_until(lambda: w.pending == 0)
    assert not c.overlapped


def test_change_during_on_batch_goes_to_a_later_batch(export: Path, make_watcher) -> None:
    entered = threading.Event()
    release = threading.Event()
    batches: list[ChangeBatch] = []

    def slow(batch: ChangeBatch) -> None:
        batches.append(batch)
        if len(batches) == 1:
            entered.set()
            release.wait(DEADLINE)

    w = make_watcher(export, slow)
    (export / "Catalogs/Товары.xml").write_text("<c>1</c>")
    assert entered.wait(DEADLINE)
    (export / "CommonModules/Общий.xml").write_text("<m>2</m>")
    assert wait_until(lambda: w.pending >= 2)  # the running batch plus the buffered change
    time.sleep(0.1)  # several quiet periods: still nothing may be delivered concurrently
    assert len(batches) == 1
    release.set()
    assert wait_until(lambda: any("CommonModules/Общий.xml" in b.paths for b in batches[1:]))
    assert "CommonModules/Общий.xml" not in batches[0].paths


def test_on_batch_exception_is_logged_and_watching_goes_on(export: Path, make_watcher, caplog) -> None:
    seen: list[ChangeBatch] = []

    def flaky(batch: ChangeBatch) -> None:
        seen.append(batch)
        if len(seen) == 1:
            raise RuntimeError("service hiccup")

    w = make_watcher(export, flaky)
    (export / "Catalogs/Товары.xml").write_text("<c>1</c>")
    assert wait_until(lambda: len(seen) == 1)
    assert wait_until(lambda: w.last_error is not None and "service hiccup" in w.last_error)
    (export / "CommonModules/Общий.xml").write_text("<m>2</m>")
    assert wait_until(lambda: any("CommonModules/Общий.xml" in b.paths for b in seen))
    assert "on_batch failed" in caplog.text


def test_continuous_storm_is_flushed_before_it_ends(export: Path, make_watcher) -> None:
    delivered: list[float] = []
    c = Collector()

    def cb(batch: ChangeBatch) -> None:
        delivered.append(time.monotonic())
        c(batch)

    make_watcher(export, cb, quiet_s=0.2, max_delay_s=0.3)
    d = export / "CommonModules/Общий/Ext"
    end = time.monotonic() + 1.5
    i = 0
    while time.monotonic() < end:  # a write every 20 ms: never 200 ms of silence
        (d / f"S{i}.bsl").write_text(str(i))
        i += 1
        time.sleep(0.02)
    assert delivered and delivered[0] < end
    c.wait_paths(*(f"CommonModules/Общий/Ext/S{k}.bsl" for k in range(i)))


def test_nfd_names_are_reported_as_nfc(export: Path, make_watcher) -> None:
    c = Collector()
    make_watcher(export, c)
    folder = unicodedata.normalize("NFD", "Справочники/Йогурты")
    name = unicodedata.normalize("NFD", "МодульЁлки.bsl")
    assert folder != unicodedata.normalize("NFC", folder)
    (export / folder).mkdir(parents=True)
    (export / folder / name).write_text("//", encoding="utf-8")
    c.wait_paths("Справочники/Йогурты/МодульЁлки.bsl")
    assert all(p == unicodedata.normalize("NFC", p) for p in c.paths | c.dirs)


def test_paths_are_relative_posix_and_inside_root(export: Path, make_watcher) -> None:
    c = Collector()
    make_watcher(export, c)
    (export / "Catalogs/Товары/Ext/ObjectModule.bsl").write_text("//")
    outside = export.parent / "outside.bsl"
    outside.write_text("//")
    os.rename(outside, export / "Catalogs/Пришёл.bsl")  # moved in from outside the root
    (export / "Catalogs/Ушёл.xml").write_text("x")
    os.rename(export / "Catalogs/Ушёл.xml", export.parent / "gone.xml")  # moved out
    c.wait_paths("Catalogs/Товары/Ext/ObjectModule.bsl", "Catalogs/Пришёл.bsl", "Catalogs/Ушёл.xml")
    for p in c.paths | c.dirs:
        assert not p.startswith("/") and "\\" not in p and ".." not in p.split("/"), p


def test_stop_is_idempotent_fast_and_callable_from_on_batch(export: Path) -> None:
    holder: list[Watcher] = []

    def stop_from_callback(batch: ChangeBatch) -> None:
        holder[0].stop()

    w = Watcher(export, stop_from_callback)
    holder.append(w)
    w.start()
    with pytest.raises(RuntimeError):
        w.start()
    (export / "Catalogs/Товары.xml").write_text("<c>1</c>")
    assert wait_until(lambda: w.mode == "off")
    t0 = time.monotonic()
    w.stop()
    w.stop()
    assert time.monotonic() - t0 < 5
    assert wait_until(lambda: w.pending == 0)  # the batch whose on_batch called stop() is done
    assert wait_until(lambda: not any(t.name.startswith("bsl-lens-watch") for t in threading.enumerate()))


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        Watcher(tmp_path, print, mode="inotify")
    with pytest.raises(ValueError):
        Watcher(tmp_path, print, quiet_s=0)
    with pytest.raises(ValueError):
        Watcher(tmp_path, print, quiet_s=1.0, max_delay_s=0.5)
    with pytest.raises(FileNotFoundError):
        Watcher(tmp_path / "missing", print).start()


def test_temp_names() -> None:
    for name in (
        "X.bsl~",
        ".#X.bsl",
        "#X.bsl#",
        "X.bsl.swp",
        ".X.bsl.SWP",
        "X.swx",
        "4913",
        "X.bsl.tmp",
        ".X.bsl.abc.tmp",
        "X.bak",
        "X.orig",
    ):
        assert is_temp_name(name), name
    for name in ("Module.bsl", "Form.xml", "X.mdo", "4914", ".project"):
        assert not is_temp_name(name), name


# ---------------------------------------------------------------- polling and fallbacks


def test_forced_polling(export: Path, make_watcher) -> None:
    c = Collector()
    w = make_watcher(export, c, mode="polling", poll_interval_s=0.1)
    assert w.mode == "polling" and w.degraded is None
    (export / "CommonModules/Общий/Ext/Module.bsl").write_text("// changed, longer than before")
    (export / "CommonModules/Новый.xml").write_text("<m/>")
    (export / "Catalogs/Товары/Ext/ObjectModule.bsl").unlink()
    (export / ".git/index.xml").write_text("x")
    c.wait_paths(
        "CommonModules/Общий/Ext/Module.bsl", "CommonModules/Новый.xml", "Catalogs/Товары/Ext/ObjectModule.bsl"
    )
    atomic_save(export / "Catalogs/Товары.xml", "<c>2</c>", "Товары.xml.tmp")
    os.rename(export / "Catalogs/Товары", export / "Catalogs/Продукты")
    assert c.wait(lambda: {"Catalogs/Товары", "Catalogs/Продукты"} <= c.dirs), c.dirs
    c.wait_paths("Catalogs/Товары.xml")
    assert not any(p.startswith(".git") for p in c.paths)
    assert not c.overflow


class FakeLibc:
    """The real inotify binding with one call failing as the kernel fails it (-1, errno set)."""

    def __init__(self, *, add_fails=None, init_fails: int = 0) -> None:
        self.real = I.libc()
        self.add_fails = add_fails  # path (bytes) -> errno or 0
        self.init_fails = init_fails
        self.rm_watch = self.real.rm_watch

    def init1(self, flags: int) -> int:
        if self.init_fails:
            ctypes.set_errno(self.init_fails)
            return -1
        return self.real.init1(flags)

    def add_watch(self, fd: int, path: bytes, mask: int) -> int:
        no = self.add_fails(path) if self.add_fails else 0
        if no:
            ctypes.set_errno(no)
            return -1
        return self.real.add_watch(fd, path, mask)


@linux_only
@pytest.mark.parametrize("where", [b"export", b"Catalogs"])
def test_inotify_limit_at_start_falls_back_to_polling(export: Path, make_watcher, monkeypatch, where) -> None:
    """The watch limit hit on the root or on any sub-folder: coverage would be partial, so poll."""
    fake = FakeLibc(add_fails=lambda p: errno.ENOSPC if p.endswith(where) else 0)
    monkeypatch.setattr(I, "_libc", fake)
    c = Collector()
    w = make_watcher(export, c, poll_interval_s=0.1)
    assert w.mode == "polling"
    assert w.degraded and "ENOSPC" in w.degraded and "max_user_watches" in w.degraded
    assert "fell back to polling" in w.problem()
    (export / "CommonModules/Общий.xml").write_text("<m>polled</m>")
    c.wait_paths("CommonModules/Общий.xml")


@linux_only
def test_inotify_instance_limit_falls_back_to_polling(export: Path, make_watcher, monkeypatch) -> None:
    monkeypatch.setattr(I, "_libc", FakeLibc(init_fails=errno.EMFILE))
    c = Collector()
    w = make_watcher(export, c, poll_interval_s=0.1)
    assert w.mode == "polling" and "EMFILE" in w.degraded
    (export / "CommonModules/Общий.xml").write_text("<m>polled</m>")
    c.wait_paths("CommonModules/Общий.xml")


@linux_only
def test_native_mode_does_not_fall_back(export: Path, monkeypatch) -> None:
    monkeypatch.setattr(I, "_libc", FakeLibc(add_fails=lambda p: errno.ENOSPC))
    w = Watcher(export, print, mode="native")
    with pytest.raises(OSError) as ei:
        w.start()
    assert ei.value.errno == errno.ENOSPC
    w.stop()


@linux_only
def test_watch_limit_on_a_later_subfolder_is_not_silent(export: Path, make_watcher, monkeypatch) -> None:
    """A folder made later hits the watch limit: switch to polling and ask for a reconcile."""
    limit = threading.Event()
    monkeypatch.setattr(I, "_libc", FakeLibc(add_fails=lambda p: errno.ENOSPC if limit.is_set() else 0))
    c = Collector()
    w = make_watcher(export, c, poll_interval_s=0.1)
    assert w.mode == "native"
    limit.set()
    (export / "Documents").mkdir()
    assert c.wait(lambda: c.overflow), c.batches
    assert w.mode == "polling" and "ENOSPC" in w.degraded and "Documents" in w.degraded
    (export / "Documents/Заказ.xml").write_text("<d/>")
    c.wait_paths("Documents/Заказ.xml")


@linux_only
def test_dead_reader_restarts_in_polling_with_overflow(export: Path, make_watcher, monkeypatch) -> None:
    orig = I.InotifyTree._handle
    boom = threading.Event()

    def handle(self, buf):
        if boom.is_set():
            raise RuntimeError("reader exploded")
        return orig(self, buf)

    monkeypatch.setattr(I.InotifyTree, "_handle", handle)
    c = Collector()
    w = make_watcher(export, c, poll_interval_s=0.1)
    assert w.mode == "native"
    boom.set()
    (export / "Catalogs/Товары.xml").write_text("<c>wake the reader</c>")
    assert c.wait(lambda: c.overflow)
    assert w.mode == "polling"
    assert w.last_error and "reader exploded" in w.last_error
    assert w.degraded and "reader exploded" in w.degraded
    (export / "CommonModules/Общий.xml").write_text("<m>polled</m>")
    c.wait_paths("CommonModules/Общий.xml")


@linux_only
def test_kernel_queue_overflow_is_reported(export: Path, make_watcher, monkeypatch) -> None:
    """A real IN_Q_OVERFLOW: hold the reader until the kernel queue overflows."""
    max_q = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    assert max_q <= 65536, f"max_queued_events={max_q}: too many files to write for this test"
    orig = I.InotifyTree._handle
    gate = threading.Event()
    gate.set()

    def gated(self, buf):
        gate.wait(DEADLINE)
        return orig(self, buf)

    monkeypatch.setattr(I.InotifyTree, "_handle", gated)
    c = Collector()
    w = make_watcher(export, c)
    assert w.mode == "native"
    d = export / "CommonModules/Общий/Ext"
    gate.clear()
    n = (max_q + 4096) // 2  # >= 2 events per file: create, close-write (+ modify)
    for i in range(n):
        (d / f"F{i}.txt").write_bytes(b"x")  # not reported: only the overflow matters
    (export / "Documents").mkdir()  # made while events are lost: watched after the overflow
    gate.set()
    assert c.wait(lambda: c.overflow, 30)
    assert w.mode == "native"
    (export / "Documents/Заказ.xml").write_text("<d/>")
    c.wait_paths("Documents/Заказ.xml")


@pytest.fixture
def deep(export: Path):
    """A folder ``Deep`` in the export for a chain of nested folders; removed without recursion."""
    top = export / "Deep"
    top.mkdir()
    yield top
    remove_chain(top)


@linux_only
def test_a_deep_folder_chain_is_watched_whole(export: Path, deep: Path, make_watcher) -> None:
    """1,200 nested folders (a ~2,400-character path): the walk has no recursion to exhaust."""
    make_chain(deep, 1200)
    c = Collector()
    w = make_watcher(export, c)
    assert w.mode == "native" and w.degraded is None and w.unwatched == {} and w.problem() is None
    bottom = "Deep/" + "/".join(["d"] * 1200)
    assert len(str(export / bottom)) > 2400
    with open(str(export / bottom / "Module.bsl"), "a", encoding="utf-8") as fh:
        fh.write("\n// edited")
    (export / "CommonModules/Общий.xml").write_text("<m>elsewhere</m>")
    c.wait_paths(f"{bottom}/Module.bsl", "CommonModules/Общий.xml")


@linux_only
def test_folders_beyond_path_max_are_skipped_by_name(export: Path, deep: Path, make_watcher) -> None:
    """Folders whose path inotify cannot take are named with the reason; the rest is watched."""
    make_chain(deep, 2100)  # 4,200+ characters: beyond PATH_MAX (4,096)
    c = Collector()
    w = make_watcher(export, c)
    assert w.mode == "native" and w.degraded is None
    ((skipped, why),) = w.unwatched.items()
    assert skipped.startswith("Deep/d/d/") and "too long" in why
    assert "1 folders are not watched" in w.problem() and "too long" in w.problem()
    (export / "CommonModules/Общий.xml").write_text("<m>elsewhere</m>")
    c.wait_paths("CommonModules/Общий.xml")
    assert w.mode == "native"


def test_polling_a_deep_chain_skips_what_is_too_deep(export: Path, deep: Path, make_watcher) -> None:
    """watchdog's polling walk recurses per level: deeper folders are skipped by name, and the
    poller lives on (it died every 2 s before)."""
    make_chain(deep, 1200)
    c = Collector()
    w = make_watcher(export, c, mode="polling", poll_interval_s=0.1)
    (export / "CommonModules/Общий.xml").write_text("<m>polled</m>")
    c.wait_paths("CommonModules/Общий.xml")
    ((skipped, why),) = w.unwatched.items()
    assert skipped.count("/") == W.POLL_MAX_DEPTH and "not polled" in why
    assert w.mode == "polling" and w.last_error is None and "not watched" in w.problem()
    time.sleep(0.5)  # a few more polls
    assert w.mode == "polling" and not c.overflow


@linux_only
def test_the_binding_reads_real_events() -> None:
    """inotify_init1/add_watch/read through ctypes against the running kernel, parsed by
    parse_events: the constants and the event layout are the kernel's."""
    d = Path(tempfile.mkdtemp(prefix="bl-ino-"))
    lib = I.libc()
    fd = lib.init1(os.O_NONBLOCK | os.O_CLOEXEC)
    assert fd >= 0
    try:
        wd = lib.add_watch(fd, os.fsencode(d), I.WATCH_MASK)
        assert wd >= 0
        (d / "a.bsl").write_text("x")
        (d / "sub").mkdir()
        os.rename(d / "a.bsl", d / "b.bsl")
        assert wait_until(lambda: bool(select.select([fd], [], [], 0)[0]))
        time.sleep(0.05)
        events = I.parse_events(os.read(fd, 65536))
        masks = {(name, m & (I.IN_CREATE | I.IN_MOVED_FROM | I.IN_MOVED_TO | I.IN_ISDIR)) for _, m, name in events}
        assert {(b"a.bsl", I.IN_CREATE), (b"sub", I.IN_CREATE | I.IN_ISDIR)} <= masks
        assert {(b"a.bsl", I.IN_MOVED_FROM), (b"b.bsl", I.IN_MOVED_TO)} <= masks
        assert all(w == wd for w, _, _ in events)
        assert lib.add_watch(fd, os.fsencode(d / "missing"), I.WATCH_MASK) == -1 and ctypes.get_errno() == errno.ENOENT
    finally:
        os.close(fd)
        shutil.rmtree(d)


def test_the_watchdog_api_we_use_is_there() -> None:
    """What the watcher takes from watchdog (polling everywhere, the native observer off Linux),
    checked against the installed release: public names and parameters only."""
    import inspect

    from watchdog.observers.api import BaseObserver
    from watchdog.observers.polling import PollingObserverVFS

    params = inspect.signature(PollingObserverVFS).parameters
    assert list(params)[:2] == ["stat", "listdir"] and "polling_interval" in params
    assert "event_filter" in inspect.signature(BaseObserver.schedule).parameters
    assert isinstance(inspect.getattr_static(BaseObserver, "emitters"), property)
    ev = W.FileMovedEvent("/a", "/b")
    assert (ev.event_type, ev.src_path, ev.dest_path, ev.is_directory) == ("moved", "/a", "/b", False)


def test_root_deleted_and_recreated(export: Path, make_watcher) -> None:
    c = Collector()
    w = make_watcher(export, c, poll_interval_s=0.1)
    shutil.rmtree(export)
    assert c.wait(lambda: c.overflow)
    assert wait_until(lambda: w.mode == "off")  # the watch is lost while the root is missing
    assert w.last_error and "gone" in w.last_error
    n = len(c.batches)
    export.mkdir()
    assert c.wait(lambda: any(b.overflow for b in c.batches[n:]), 15)  # restarted: reconcile
    assert w.mode == "native"
    (export / "Recreated.xml").write_text("<cfg/>")
    c.wait_paths("Recreated.xml")


@pytest.mark.parametrize("mode", ["auto", "polling"])
def test_bsl_lens_ignore_keeps_its_files_quiet_and_its_change_reconciles_everything(
    export: Path, make_watcher, mode: str
) -> None:
    (export / ".bsl-lens-ignore").write_text("# test code\ntests/\n*Черновик*.bsl\n", encoding="utf-8")
    (export / "tests/Модуль/Ext").mkdir(parents=True)
    c = Collector()
    make_watcher(export, c, mode=mode, poll_interval_s=0.1)
    (export / "tests/Модуль/Ext/Module.bsl").write_text("// ignored", encoding="utf-8")
    (export / "tests/Новая").mkdir()
    (export / "CommonModules/Общий/Ext/Черновик1.bsl").write_text("// ignored", encoding="utf-8")
    sentinel = export / "CommonModules/Общий/Ext/Module.bsl"
    sentinel.write_text("// sentinel", encoding="utf-8")
    c.wait_paths("CommonModules/Общий/Ext/Module.bsl")
    assert c.paths == {"CommonModules/Общий/Ext/Module.bsl"} and c.dirs == set() and not c.overflow
    # new rules: a full reconcile, and what they no longer ignore is reported again
    (export / ".bsl-lens-ignore").write_text("*Черновик*.bsl\n", encoding="utf-8")
    assert c.wait(lambda: c.overflow)
    (export / "tests/Модуль/Ext/Module.bsl").write_text("// now watched", encoding="utf-8")
    c.wait_paths("tests/Модуль/Ext/Module.bsl")


@pytest.mark.parametrize("mode", ["auto", "polling"])
def test_a_bad_ignore_file_keeps_the_watch_whole_and_its_good_lines_apply(
    export: Path, make_watcher, mode: str
) -> None:
    (export / "tests/Модуль/Ext").mkdir(parents=True)
    c = Collector()
    w = make_watcher(export, c, mode=mode, poll_interval_s=0.1)
    (export / ".bsl-lens-ignore").write_text("fixtures/\n!\ntests/\n", encoding="utf-8")  # "!" is no pattern
    assert c.wait(lambda: c.overflow)  # the rules changed: a full reconcile (the scan reports the line)
    (export / "tests/Модуль/Ext/Module.bsl").write_text("// ignored by the good line", encoding="utf-8")
    sentinel = export / "CommonModules/Общий/Ext/Module.bsl"
    sentinel.write_text("// sentinel", encoding="utf-8")
    c.wait_paths("CommonModules/Общий/Ext/Module.bsl")
    assert "tests/Модуль/Ext/Module.bsl" not in c.paths
    assert w.problem() is None  # the watch did not fall back or stop
