"""``bsl-lens mcp``: run the MCP server on stdio (default) or streamable HTTP.

stdio: the host launches ``bsl-lens mcp ROOT`` and speaks MCP over its stdin/stdout. Only
protocol goes to stdout: logging is on stderr (configured by :func:`daemon.cli.main.main`), and while
serving the SDK points fd 1 at stderr so stray output of libraries misses the wire; a
spawned daemon's stdout is /dev/null.

HTTP (``--http``): streamable HTTP at ``http://HOST:PORT/mcp``, bound to 127.0.0.1 by
default. Requests with an ``Origin`` header are refused (403) unless it is a loopback
origin (``http://localhost:*``, ``http://127.0.0.1:*``, ``http://[::1]:*``) or given with
``--allow-origin`` (DNS rebinding); on a loopback bind the SDK also checks ``Host``. A
non-loopback ``--host`` is refused unless ``--token`` is set; with a token every request
must carry ``Authorization: Bearer <token>`` (401 otherwise).
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import socket
import sys
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

LOOPBACK_ORIGINS = (
    "http://127.0.0.1",
    "http://localhost",
    "http://[::1]",
    "https://127.0.0.1",
    "https://localhost",
    "https://[::1]",
)


def _say(message: str) -> None:
    """A line for the person who started the server, on stderr (stdout carries the MCP
    protocol in stdio mode)."""
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback IP literals (127.0.0.0/8, ::1)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def origin_allowed(origin: str, extra: list[str]) -> bool:
    """Is a request's ``Origin`` acceptable: a loopback origin on any port, or one listed
    in ``extra`` (exact, or ``scheme://host:*`` for any port)."""
    origin = origin.rstrip("/")
    for base in LOOPBACK_ORIGINS:
        if origin == base or origin.startswith(base + ":"):
            return True
    for allowed in extra:
        allowed = allowed.rstrip("/")
        if origin == allowed or (allowed.endswith(":*") and origin.startswith(allowed[:-1])):
            return True
    return False


class Guard:
    """ASGI middleware in front of the MCP app: ``Origin`` check and optional bearer token.

    ``token`` None: no authentication (loopback binds only). Non-HTTP scopes (lifespan)
    pass through untouched.
    """

    def __init__(self, app: Any, *, token: str | None = None, allow_origins: list[str] | None = None) -> None:
        self.app = app
        self.token = token
        self.allow_origins = list(allow_origins or [])

    async def __call__(self, scope, receive, send) -> None:
        """ASGI entry: refuse a foreign ``Origin`` or a missing/wrong token (HTTP only), else pass on."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        origin = headers.get("origin")
        if origin and not origin_allowed(origin, self.allow_origins):
            log.warning("refused a request with Origin %s", origin)
            await _reply(send, 403, "Forbidden: Origin not allowed\n")
            return
        if self.token is not None:
            auth = headers.get("authorization", "")
            scheme, _, given = auth.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), self.token.encode()):
                await _reply(
                    send,
                    401,
                    "Unauthorized: Authorization: Bearer <token> required\n",
                    [(b"www-authenticate", b'Bearer realm="bsl-lens"')],
                )
                return
        await self.app(scope, receive, send)


async def _reply(send, status: int, body: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    data = body.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(data)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


def http_app(server, *, host: str, token: str | None, allow_origins: list[str]):
    """The ASGI app for ``--http``: the SDK's streamable HTTP app (its lifespan starts the
    daemon links) behind :class:`Guard`."""
    from mcp.server.transport_security import TransportSecuritySettings

    if is_loopback(host):
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"],
            allowed_origins=[f"{o}:*" for o in LOOPBACK_ORIGINS] + list(LOOPBACK_ORIGINS) + list(allow_origins),
        )
    else:  # any Host may reach a public bind; the token and the Origin check guard it
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    app = server.streamable_http_app(transport_security=security, host=host)
    return Guard(app, token=token, allow_origins=allow_origins)


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: any free port). OSError if taken."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _, _, _, addr = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def serve_http(server, *, host: str, port: int, token: str | None, allow_origins: list[str]) -> int:
    """Serve streamable HTTP until interrupted; prints the URL on stderr. Returns 0."""
    import anyio
    import uvicorn

    app = http_app(server, host=host, token=token, allow_origins=allow_origins)
    sock = bind(host, port)
    actual = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    _say(f"bsl-lens mcp: streamable HTTP on http://{shown}:{actual}/mcp")
    config = uvicorn.Config(
        app, log_config=None, access_log=False, lifespan="on", log_level="warning", timeout_graceful_shutdown=5
    )
    uv = uvicorn.Server(config)
    anyio.run(lambda: uv.serve(sockets=[sock]))
    return 0


def spawn_args(args) -> list[str]:
    """The ``daemon run`` arguments of a daemon this server starts, from the parsed
    ``bsl-lens mcp`` arguments (``--embedder`` already settled by flag > ``BSL_LENS_EMBEDDER``
    > default in :func:`daemon.cli.parser.parse_args`; ``--watch``, ``--reconcile-interval``)."""
    from daemon.client import daemon_args

    return daemon_args(
        embedder=args.embedder,
        watch=args.watch,
        reconcile_interval=args.reconcile_interval,
        shared_cache=args.shared_cache,
        shared_cache_mode=args.shared_cache_mode if args.shared_cache else None,
        docs=getattr(args, "docs", None) or (),
        platform_help=getattr(args, "platform_help", None) or (),
        platform_version=getattr(args, "platform_version", None),
    )


def run(args, roots: list[Path]) -> int:
    """``bsl-lens mcp``: build the server for ``roots`` (resolved and checked by the CLI,
    :func:`daemon.cli.servers.resolve_roots`) and serve. Returns the exit code (1 with a message
    on stderr for bad flags)."""
    from .links import RootLink, root_names
    from .server import build_server

    index_dirs = list(args.index_dir or [])
    if index_dirs and len(index_dirs) != len(roots):
        _say(
            f"bsl-lens mcp: error: {len(index_dirs)} --index-dir for {len(roots)} roots: "
            "give one per ROOT, in the same order"
        )
        return 1
    if args.http and not is_loopback(args.host) and not args.token:
        _say(
            f"bsl-lens mcp: error: refusing to serve on the non-loopback address {args.host} without --token "
            "(anyone who can reach it could read the code)"
        )
        return 1
    spawn = spawn_args(args)
    names = root_names(roots)
    links = [
        RootLink(r, n, index_dir=index_dirs[i] if index_dirs else None, spawn_args=spawn)
        for i, (r, n) in enumerate(zip(roots, names, strict=True))
    ]
    server = build_server(links)
    if args.http:
        return serve_http(
            server, host=args.host, port=args.port, token=args.token, allow_origins=args.allow_origin or []
        )
    server.run("stdio")
    return 0
