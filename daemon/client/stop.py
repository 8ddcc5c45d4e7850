"""Stopping the daemon of an export root: ask it, then signal it if it does not go."""

from __future__ import annotations

import os
from collections.abc import Callable

import msgspec

from ..server import runtime
from .connection import DaemonError
from .spawn import connect


class StopError(RuntimeError):
    """:func:`stop_daemon` could not stop the daemon, or refused to; the message says why
    and what to do."""


class Stopped(msgspec.Struct, frozen=True):
    """What :func:`stop_daemon` did: ``was_running`` False when no daemon held the root lock;
    ``pid`` of the stopped daemon (None when unknown)."""

    was_running: bool
    pid: int | None = None


def stop_daemon(paths: runtime.Paths, timeout: float, *, note: Callable[[str], None] | None = None) -> Stopped:
    """Stop the daemon of ``paths.root``, found by the root lock whatever index dir it uses:
    a ``shutdown`` request, then a wait of up to ``timeout`` seconds for the root lock to
    be free (which means the final save is done). If it does not answer (still starting,
    hung) or does not exit, SIGTERM (plus SIGCONT for a stopped process; 10 s) and then
    SIGKILL (5 s) the pid holding the root lock. Leftover files are removed afterwards.

    ``note`` receives a line for each step the user should see (no answer, a signal sent).
    Raises :class:`StopError` when ``paths.index_dir`` is not the daemon's (naming its
    own), when the root lock is held by another pid than the daemon's (no signal is sent),
    or when the pid still holds the lock after SIGKILL.
    """
    import signal

    say = note or (lambda text: None)
    owner = runtime.root_owner(paths)
    if owner is None:
        runtime.clean_stale(paths)
        return Stopped(was_running=False)
    if owner.index_dir and owner.index_dir != str(paths.index_dir):
        raise StopError(
            f"the daemon for {paths.root} (pid {owner.pid or '?'}) uses the index dir {owner.index_dir}, "
            f"not {paths.index_dir}; not stopping it. Stop it with: "
            f"bsl-lens daemon stop {paths.root} --index-dir {owner.index_dir}"
        )
    pid = owner.pid or None
    asked = False
    try:
        with connect(
            paths.root, index_dir=paths.index_dir, spawn=False, request_timeout=10.0, connect_timeout=5.0, client="cli"
        ) as c:
            pid = c.hello.pid
            c.shutdown()
            asked = True
    except DaemonError as exc:
        say(f"the daemon does not answer ({exc}); stopping it by signal")
    if asked and pid is not None and _replaced(paths, pid, timeout):
        # it exited and a client (an editor's language server, an agent's bridge) started a
        # new daemon for the root at once: the one asked to stop did stop; the new one's
        # files are not stale
        say(f"pid {pid} stopped; pid {runtime.lock_holder(paths.root_lock) or '?'} serves the root now")
        return Stopped(was_running=True, pid=pid)
    if not asked or runtime.lock_is_held(paths.root_lock):
        holder = runtime.lock_holder(paths.root_lock)
        if holder is None and not runtime.lock_is_held(paths.root_lock):
            pass  # it exited meanwhile
        elif pid is None or holder != pid:
            raise StopError(
                f"{paths.root_lock} is held by pid {holder or '?'}, not by the daemon's pid {pid or '?'}; "
                "not sending signals"
            )
        else:
            for sig, wait in ((signal.SIGTERM, 10.0), (getattr(signal, "SIGKILL", signal.SIGTERM), 5.0)):
                if runtime.lock_holder(paths.root_lock) != pid:
                    break
                say(f"sending {sig.name} to pid {pid}")
                try:
                    os.kill(pid, sig)
                    if sig == signal.SIGTERM and hasattr(signal, "SIGCONT"):
                        os.kill(pid, signal.SIGCONT)  # a stopped (Ctrl-Z) daemon must run to handle it
                except ProcessLookupError:
                    break
                if runtime.wait_lock_free(paths.root_lock, wait):
                    break
            if runtime.lock_is_held(paths.root_lock):
                raise StopError(f"pid {pid} still holds {paths.root_lock}")
    runtime.clean_stale(paths)
    return Stopped(was_running=True, pid=pid)


def _replaced(paths: runtime.Paths, pid: int, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for the daemon ``pid`` to release the root lock. True
    when another process holds the lock by then while ``pid`` is gone (a client started a new
    daemon right after this one exited); False when the lock is free or still ``pid``'s."""

    def taken_over() -> bool:
        holder = runtime.lock_holder(paths.root_lock)
        return holder is not None and holder != pid and not _alive(pid)

    return not runtime.wait_lock_free(paths.root_lock, timeout, give_up=taken_over) and taken_over()


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (a zombie counts as gone)."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
