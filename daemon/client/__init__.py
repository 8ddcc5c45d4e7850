"""Clients of the bsl-lens daemon: find it for an export root, spawn it if needed, talk to it.

* :mod:`daemon.client.connection`: :class:`DaemonClient` (blocking; the CLI and tests) and
  :class:`AsyncDaemonClient` (asyncio; the LSP and MCP front ends), and the errors;
* :mod:`daemon.client.spawn`: :func:`connect` / :func:`connect_async` find the root's daemon,
  starting one when there is none (:func:`ensure_daemon`);
* :mod:`daemon.client.supervisor`: :class:`Supervisor`, one root's connection kept in the
  background for a front end (connect, retry, reconnect);
* :mod:`daemon.client.stop`: :func:`stop_daemon`.

Import from here; the modules are the layout.
"""

from .connection import (
    HELLO_TIMEOUT,
    REQUEST_TIMEOUT,
    AsyncDaemonClient,
    CommandError,
    DaemonClient,
    DaemonError,
    DaemonNotRunning,
    DaemonTimeout,
    ProtocolError,
)
from .spawn import (
    PROBE_MAX_DELAY,
    SPAWN_TIMEOUT,
    RootBusy,
    address_of,
    connect,
    connect_async,
    daemon_args,
    ensure_daemon,
    find_daemon,
)
from .stop import StopError, Stopped, stop_daemon
from .supervisor import RETRY_FIRST_S, RETRY_MAX_S, Supervisor

__all__ = [
    "HELLO_TIMEOUT",
    "PROBE_MAX_DELAY",
    "REQUEST_TIMEOUT",
    "RETRY_FIRST_S",
    "RETRY_MAX_S",
    "SPAWN_TIMEOUT",
    "AsyncDaemonClient",
    "CommandError",
    "DaemonClient",
    "DaemonError",
    "DaemonNotRunning",
    "DaemonTimeout",
    "ProtocolError",
    "RootBusy",
    "StopError",
    "Stopped",
    "Supervisor",
    "address_of",
    "connect",
    "connect_async",
    "daemon_args",
    "ensure_daemon",
    "find_daemon",
    "stop_daemon",
]
