"""The framework internals bsl-lens overrides, pinned (issue 11, item 6).

Each override exists because the public API cannot do the job. Each test here checks that
the upstream limitation is still there and that the internals the override touches still
exist: when one fails after an upgrade, drop or adapt the override it names.
"""

from __future__ import annotations

import inspect

from pygls.io_ import run_async
from pygls.protocol import JsonRPCProtocol, LanguageServerProtocol
from pygls.server import JsonRPCServer


def test_pygls_shutdown_still_iterates_the_live_dict():
    # lsp.wire.BslLensProtocol.lsp_shutdown: pygls cancels pending requests while iterating
    # over _request_futures itself; a cancelled generator-handled request removes itself at
    # once ("dictionary changed size during iteration"). Upstream fixed -> drop the override.
    src = inspect.getsource(LanguageServerProtocol.lsp_shutdown)
    assert "in self._request_futures.items()" in src and "list(self._request_futures" not in src
    for name in ("msg_id", "_shutdown", "fm"):
        assert name in src


def test_pygls_writer_is_still_json_dumps():
    # lsp.wire.BslLensProtocol._send_data: pygls encodes every message with json.dumps
    # (~10x slower than msgspec for a 128-symbol answer) and has no hook for another encoder.
    src = inspect.getsource(JsonRPCProtocol._send_data)
    assert "json.dumps(" in src
    for name in ("self.writer", "self._include_headers", "self.CONTENT_TYPE", "self.CHARSET"):
        assert name in src
    proto = LanguageServerProtocol.__init__
    assert "_converter" in inspect.getsource(JsonRPCProtocol.__init__) or "_converter" in inspect.getsource(proto)


def test_pygls_stdio_still_builds_its_own_threaded_reader():
    # lsp.server.serve_stdio: pygls' start_io always reads stdin through StdinAsyncReader (a
    # thread per read) and takes no reader; we run its run_async loop with a pipe reader and
    # hand it our stop event through _stop_event, which pygls' shutdown/exit set.
    assert "StdinAsyncReader(" in inspect.getsource(JsonRPCServer._start_io_async)
    assert "self._stop_event.set()" in inspect.getsource(JsonRPCServer.shutdown)
    assert list(inspect.signature(run_async).parameters) == [
        "stop_event",
        "reader",
        "protocol",
        "logger",
        "error_handler",
    ]


def test_mcp_tools_still_ignore_unknown_arguments():
    # mcp_bridge.server._strict swaps tool.fn_metadata.arg_model for a model with
    # extra="forbid": the SDK's argument models drop unknown arguments silently, so a model's
    # typo ("topk") would be ignored instead of reported. Upstream forbids -> drop _strict.
    from mcp.server.mcpserver.tools import Tool
    from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase

    from mcp_bridge.server import _strict

    def probe(x: int) -> int:
        """Probe."""
        return x

    tool = Tool.from_function(probe)
    assert ArgModelBase.model_config.get("extra") in (None, "ignore")
    assert issubclass(tool.fn_metadata.arg_model, ArgModelBase)
    assert tool.fn_metadata.arg_model.model_validate({"x": 1, "typo": 2}).model_dump() == {"x": 1}  # dropped silently
    strict = _strict(tool).fn_metadata.arg_model
    assert strict.model_json_schema().get("additionalProperties") is False
