"""The ``workspace/executeCommand`` commands: ``bsl-lens.status`` (the server and every folder's
daemon) and ``bsl-lens.reindex`` (ask the daemons to re-check their files)."""

from __future__ import annotations

import os
from typing import Any, Protocol

import msgspec
from pygls.exceptions import JsonRpcInvalidParams

from daemon import __version__

from . import convert
from .roots import Root
from .settings import Settings

STATUS_COMMAND = "bsl-lens.status"
REINDEX_COMMAND = "bsl-lens.reindex"


class CommandServer(Protocol):
    """What the commands need of the language server (``lsp.server.BslLensServer``): its
    settings, folders and request counters. A protocol, so that this module does not import
    the server that registers them."""

    settings: Settings
    roots: list[Root]
    inflight: int
    requests: int
    cancelled: int

    def ready_roots(self, folder: str | None = None) -> list[Root]: ...  # noqa: D102

    async def call_daemon(self, root: Root, method: str, *args: Any, serial: bool = False, **kw: Any) -> Any: ...  # noqa: D102


async def status(server: CommandServer) -> dict:
    """The ``bsl-lens.status`` command: the server and every folder with its daemon's
    status when connected (``daemon``: the service's ``Status`` fields as ``bsl-lens
    status --json`` shows them; ``process``: pid, socket, log, connections, requests
    answered)."""
    folders = []
    for r in server.roots:
        entry = r.describe()
        res = await server.call_daemon(r, "status") if r.client is not None else None
        if res is not None:
            entry["daemon"] = msgspec.to_builtins(res.service)
            entry["process"] = msgspec.to_builtins(res.daemon)
        folders.append(entry)
    return {
        "version": __version__,
        "pid": os.getpid(),
        "inflight": server.inflight,
        "requests": server.requests,
        "cancelled": server.cancelled,
        "settings": msgspec.to_builtins(server.settings),
        "folders": folders,
    }


async def reindex(server: CommandServer, args: tuple) -> dict:
    """The ``bsl-lens.reindex`` command. Argument (optional): ``{"folder": uri,
    "full": bool, "paths": [relative paths]}`` or a folder URI. Default: a full re-check
    by content hash of every folder (only changed files are re-read)."""
    arg = convert.plain(args[0]) if args else {}
    if isinstance(arg, str):
        arg = {"folder": arg}
    if not isinstance(arg, dict):
        raise JsonRpcInvalidParams.of(ValueError("bsl-lens.reindex takes {folder?, full?, paths?} or a folder URI"))
    paths = arg.get("paths")
    if paths is not None and not (isinstance(paths, list) and all(isinstance(x, str) for x in paths)):
        raise JsonRpcInvalidParams.of(ValueError("paths must be a list of paths relative to the folder"))
    full = bool(arg.get("full", not paths))
    roots = server.ready_roots(arg.get("folder"))
    queued = []
    for r in roots:
        if await server.call_daemon(r, "reindex", full=full, paths=paths) is not None:
            queued.append(r.folder.uri)
    return {"queued": queued, "full": full}
