"""daemon.client.Supervisor: the one connection supervisor of the LSP server and the MCP
bridge, against real daemon processes (no spawning here: spawn=False, so every state is
reached by starting and killing daemons ourselves)."""

from __future__ import annotations

import asyncio
import time

from daemon.client import supervisor as dclient
from daemon.client import DaemonNotRunning, Supervisor


async def _until(pred, timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


def test_retrying_supervisor_connects_when_the_daemon_comes_and_reconnects_after_a_kill(
    daemons, sample_root, tmp_path, monkeypatch
):
    monkeypatch.setattr(dclient, "RETRY_FIRST_S", 0.05)
    monkeypatch.setattr(dclient, "RETRY_MAX_S", 0.2)
    idx = tmp_path / "idx"
    events: list[str] = []
    failures: list[int] = []

    async def main():
        sup = Supervisor(
            sample_root,
            index_dir=idx,
            spawn=False,
            client="tests",
            on_connecting=lambda: events.append("connecting"),
            on_failed=lambda exc, n: (failures.append(n), events.append(type(exc).__name__)),
            on_connected=lambda c: events.append("connected"),
            on_lost=lambda err: events.append("lost"),
        )
        assert sup.state == "idle" and await sup.wait(0.01) is None
        sup.start()
        await _until(lambda: len(failures) >= 2, what="two failed attempts")
        assert sup.state == "unavailable" and isinstance(sup.error, DaemonNotRunning) and sup.running
        assert failures[:2] == [1, 2] and events.count("connecting") == 1  # one per series of attempts
        d = await asyncio.to_thread(daemons.start, sample_root, "--embedder", "none", "--watch", "off", index_dir=idx)
        c = await sup.wait(60.0)
        assert c is not None and c.hello.pid == d.pid and sup.state == "ready" and sup.error is None
        assert sup.connections == 1 and (await c.status()).service.root == str(sample_root.resolve())
        await asyncio.to_thread(d.kill)
        await _until(lambda: "lost" in events, what="the lost connection")
        assert sup.client is None
        d2 = await asyncio.to_thread(daemons.start, sample_root, "--embedder", "none", "--watch", "off", index_dir=idx)
        c2 = await sup.wait(60.0)
        await _until(lambda: sup.client is not None and sup.client.hello.pid == d2.pid, what="the reconnect")
        assert sup.connections == 2 and events[-1] == "connected" and events.count("connecting") == 2
        await sup.close()
        assert sup.state == "closed" and sup.client is None and not sup.running
        sup.start()  # closed for good
        assert not sup.running
        assert c2 is not None

    asyncio.run(main())


def test_one_shot_supervisor_ends_after_a_failure_and_can_be_started_again(daemons, sample_root, tmp_path):
    idx = tmp_path / "idx"

    async def main():
        sup = Supervisor(sample_root, index_dir=idx, spawn=False, client="tests", retry=False, reconnect=False)
        sup.start()
        assert await sup.wait(30.0) is None  # the attempt ended: no daemon
        assert not sup.running and sup.state == "unavailable" and sup.failed_at > 0
        d = await asyncio.to_thread(daemons.start, sample_root, "--embedder", "none", "--watch", "off", index_dir=idx)
        sup.start()
        c = await sup.wait(60.0)
        assert c is not None and c.hello.pid == d.pid and not sup.running  # no watching task
        await sup.drop()
        assert sup.client is None and sup.state == "starting"
        await sup.close(for_good=False)
        assert sup.state == "idle"
        sup.start()
        assert (await sup.wait(60.0)) is not None
        await sup.close()

    asyncio.run(main())
