"""Real daemon processes for tests: start them through the CLI, always stop them.

Use the ``daemons`` fixture (registered in ``tests/conftest.py``)::

    def test_x(daemons, sample_root):
        d = daemons.start(sample_root, "--embedder", "none", "--watch", "off")
        with d.client() as c:
            assert c.status().service.modules == 15
        d.stop()                        # optional: teardown stops whatever is left

``daemons.start(root, *args)`` runs ``bsl-lens daemon start ROOT --index-dir <tmp> *args``
(a real subprocess; the daemon is spawned by the real client code) and returns a
:class:`DaemonHandle` once the daemon answers ``hello``. ``daemons.adopt(root, index_dir)``
registers a daemon started some other way (e.g. by a client under test) so that teardown
stops it too. Teardown: ``shutdown`` request, wait for the lock to be free, else SIGKILL
the pid that holds it. Every wait has a timeout; nothing sleeps-and-hopes.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from daemon.server import runtime
from daemon.client import DaemonClient, DaemonError, connect

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "daemon" / "sample_export"
#: Seconds any single CLI call or wait in these helpers may take before the test fails.
TIMEOUT = 120.0


def run_cli(
    *args: str, env: dict | None = None, timeout: float = TIMEOUT, check: bool = False
) -> subprocess.CompletedProcess:
    """``python -m daemon.cli *args`` from the repository root; text output captured."""
    proc = subprocess.run(
        [sys.executable, "-m", "daemon.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env=os.environ.copy() if env is None else env,
    )
    if check:
        assert proc.returncode == 0, (args, proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:])
    return proc


def wait_until(pred, timeout: float = TIMEOUT, what: str = "condition") -> None:
    """Poll ``pred()`` (10 ms doubling to 0.2 s) until true; AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


def transport() -> str:
    """The transport of the daemons this session starts: ``tcp`` under ``pytest --daemon-transport
    tcp`` (or ``BSL_LENS_TRANSPORT=tcp``), else ``unix``."""
    return (os.environ.get("BSL_LENS_TRANSPORT") or "unix").strip().lower()


def copy_sample(dst: Path) -> Path:
    """A private copy of the bundled sample export (15 modules, 68 methods)."""
    shutil.copytree(SAMPLE, dst)
    return dst


def make_chain(top: Path, depth: int, name: str = "d") -> Path:
    """``depth`` nested folders ``name`` below ``top`` with a ``Module.bsl`` at the bottom, made
    relative to an open folder each step (the whole path may exceed PATH_MAX). Remove it with
    :func:`remove_chain`: pytest's own clean-up of old temp folders recurses per level and would
    fail on it, for every later test session on the machine."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            nxt = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nxt
        with open(os.open("Module.bsl", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w", encoding="utf-8") as fh:
            fh.write("// at the bottom\n")
    finally:
        os.close(fd)
    return top / name


def remove_chain(top: Path) -> None:
    """Remove a folder tree of any depth (and ``top`` itself) without recursion."""
    if not os.path.lexists(top):
        return
    fds = [os.open(top, os.O_RDONLY | os.O_DIRECTORY)]
    names: list[str] = []
    try:
        while fds:
            sub = None
            for e in os.scandir(fds[-1]):
                if e.is_dir(follow_symlinks=False):
                    sub = e.name
                    break
                os.unlink(e.name, dir_fd=fds[-1])
            if sub is not None:
                fds.append(os.open(sub, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fds[-1]))
                names.append(sub)
                continue
            os.close(fds.pop())
            if names:
                os.rmdir(names.pop(), dir_fd=fds[-1])
    finally:
        for fd in fds:
            os.close(fd)
    os.rmdir(top)


class DaemonHandle:
    """One daemon under test: ``root``, ``index_dir``, ``pid``, ``paths`` (daemon.server.runtime.Paths)."""

    def __init__(self, root: Path, index_dir: Path, pid: int):
        self.root = Path(root)
        self.index_dir = Path(index_dir)
        self.pid = pid
        self.paths = runtime.paths_for(root, index_dir)

    def client(self, **kw) -> DaemonClient:
        """A connected client (never spawns); kwargs go to :func:`daemon.client.connect`."""
        kw.setdefault("client", "tests")
        kw.setdefault("request_timeout", TIMEOUT)
        return connect(self.root, index_dir=self.index_dir, spawn=False, **kw)

    def address(self) -> str:
        """Where the daemon listens: its socket path, or ``tcp:127.0.0.1:<port>``."""
        from daemon.client import address_of

        return address_of(self.paths)

    def listening(self) -> bool:
        """The daemon's endpoint is there: its socket file, or the port in ``daemon.json``."""
        if transport() == "tcp":
            st = runtime.read_state(self.paths)
            return st is not None and st.port > 0
        return self.paths.socket.exists()

    def raw(self):
        """A raw connection to the daemon and a binary file over it, for hand-written lines;
        the first line must be :meth:`hello_line`."""
        import socket

        address = self.address()
        if address.startswith("tcp:"):
            host, port = address[4:].rsplit(":", 1)
            s = socket.create_connection((host, int(port)), timeout=TIMEOUT)
        else:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(TIMEOUT)
            s.connect(address)
        return s, s.makefile("rwb")

    def hello_line(self, client: str = "raw") -> bytes:
        """A ``hello`` request line (with the token over TCP)."""
        import json

        from daemon.server import protocol

        params = {"protocol": protocol.PROTOCOL_VERSION, "client": client}
        token = runtime.read_token(self.paths)
        if token:
            params["token"] = token
        return json.dumps({"jsonrpc": "2.0", "id": 0, "method": "hello", "params": params}).encode() + b"\n"

    def alive(self) -> bool:
        """True while some process holds the daemon's index-dir lock, or the root lock on
        behalf of this index dir (a daemon starting or finishing its stop)."""
        if runtime.lock_is_held(self.paths.lock):
            return True
        owner = runtime.root_owner(self.paths)
        return owner is not None and owner.index_dir in ("", str(self.paths.index_dir))

    def cli(self, *args: str, **kw) -> subprocess.CompletedProcess:
        """``bsl-lens <command> ROOT --index-dir DIR <rest>``; the command is ``args[0]``, or
        ``args[:2]`` for ``daemon start|stop|restart|run``."""
        n = 2 if args[0] == "daemon" else 1
        return run_cli(*args[:n], str(self.root), "--index-dir", str(self.index_dir), *args[n:], **kw)

    def wait_idle(self, timeout: float = TIMEOUT) -> None:
        """Wait until the daemon's first index and queued work are done."""
        with self.client() as c:
            assert c.wait_idle(timeout), f"daemon for {self.root} not idle after {timeout} s"

    def kill(self) -> None:
        """SIGKILL the daemon and wait until its lock is free (the OS releases it)."""
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        wait_until(lambda: not self.alive(), 30, f"pid {self.pid} to die")

    def stop(self, timeout: float = 60.0) -> None:
        """``shutdown``, wait for the lock; SIGKILL the lock holder if it is still ours."""
        if not self.alive():
            return
        try:
            with self.client(connect_timeout=5.0, request_timeout=10.0) as c:
                c.shutdown()
        except DaemonError:
            pass
        try:
            wait_until(lambda: not self.alive(), timeout, f"daemon pid {self.pid} to exit")
        except AssertionError:
            holder = runtime.lock_holder(self.paths.lock) or runtime.lock_holder(self.paths.root_lock)
            if holder is not None:
                try:
                    os.kill(holder, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            wait_until(lambda: not self.alive(), 30, f"pid {holder} to die")


class Daemons:
    """Factory behind the ``daemons`` fixture; stops everything it knows in :meth:`close`."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.handles: list[DaemonHandle] = []
        self._n = 0

    def index_dir(self) -> Path:
        self._n += 1
        return self.tmp / f"idx{self._n}"

    def start(self, root: Path, *args: str, index_dir: Path | None = None, wait_idle: bool = False) -> DaemonHandle:
        """``bsl-lens daemon start ROOT --index-dir DIR *args`` (asserts exit 0)."""
        index_dir = index_dir or self.index_dir()
        # register before starting: a start that fails half-way is still cleaned up
        placeholder = DaemonHandle(root, index_dir, -1)
        self.handles.append(placeholder)
        run_cli("daemon", "start", str(root), "--index-dir", str(index_dir), *args, check=True)
        with placeholder.client() as c:
            placeholder.pid = c.hello.pid
        if wait_idle:
            placeholder.wait_idle()
        return placeholder

    def adopt(self, root: Path, index_dir: Path) -> DaemonHandle:
        """Track a daemon some other code started (pid filled in if it answers)."""
        h = DaemonHandle(root, index_dir, -1)
        self.handles.append(h)
        try:
            with h.client(connect_timeout=5.0) as c:
                h.pid = c.hello.pid
        except DaemonError:
            pass
        return h

    def close(self) -> None:
        errors = []
        for h in self.handles:
            try:
                h.stop()
            except Exception as exc:  # keep stopping the others
                errors.append(exc)
            runtime.clean_stale(h.paths)
        if errors:
            raise errors[0]
