"""The file control channel's doorbell: one watcher per process, handed on one holder at a time.

A served worker holds one session per run on the file stores' mailbox; runs end all the
time. When the holder watching the doorbell ends, only the next one takes over: the other
holders do not wake to list their folders (that cost every run's end one listing per held
run). Commands sent from another process still reach every holder after any number of
hand-overs, also when the holder handed the watch is leaving at that moment.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import pytest

from agentkit.session import _file_control as fc

pytestmark = pytest.mark.anyio

CHANNEL = "agentkit_ctl_doorbell"


class Holders:
    """Holders of one channel in this process, each in its own task and cancel scope."""

    def __init__(self, control: fc.FileControlChannel) -> None:
        self.control = control
        self.scopes: list[anyio.CancelScope] = []
        self.got: list[list[dict[str, object]]] = []

    async def hold(self, tg: anyio.abc.TaskGroup, n: int) -> None:
        for _ in range(n):
            await tg.start(self._hold)

    async def _hold(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        got: list[dict[str, object]] = []

        async def on_command(command: dict[str, object]) -> None:
            got.append(command)

        with anyio.CancelScope() as scope:
            self.scopes.append(scope)
            self.got.append(got)
            async with self.control.subscribe(CHANNEL, on_command):
                task_status.started()
                await anyio.sleep_forever()


def folders(mailbox: Path) -> list[Path]:
    """The holder folders of the channel."""
    return [Path(e.path) for e in os.scandir(mailbox) if e.name.startswith(CHANNEL + "@")]


def mail_from_another_process(mailbox: Path, folder: Path, command: dict[str, object]) -> None:
    """What ``publish`` in another process does for one holder folder: write, then ring."""
    name = f"{0:020d}-test"
    (folder / f"{name}.json").write_text(json.dumps(command))
    bell = folder.name.rpartition("@")[2]
    fc._ring(mailbox / ".bells" / "-".join(bell.split("-", 2)[:2]), name)


async def ticks(n: int = 5) -> None:
    await anyio.sleep(n * fc.POLL_INTERVAL)


async def test_a_holder_leaving_wakes_no_other_holder_to_list_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mailbox = tmp_path / "mailbox"
    listed: list[str] = []
    real = os.listdir

    def counting(path: str | os.PathLike[str] = ".") -> list[str]:
        if "@" in os.fspath(path):
            listed.append(os.fspath(path))
        return real(path)

    monkeypatch.setattr(fc.os, "listdir", counting)
    holders = Holders(fc.FileControlChannel(mailbox))
    async with anyio.create_task_group() as tg:
        await holders.hold(tg, 10)
        await ticks()
        for scope in holders.scopes[:9]:  # runs end, oldest (the watcher) first
            scope.cancel()
            await ticks(2)
        # Nobody rang, so no holder looked into its folder (not even the new one at first).
        assert listed == []
        listed.clear()
        [left] = folders(mailbox)
        mail_from_another_process(mailbox, left, {"command": "interrupt"})
        with anyio.fail_after(10):
            while not holders.got[9]:
                await ticks(1)
        assert holders.got[9] == [{"command": "interrupt"}]
        assert set(listed) == {str(left)}  # the ring: the one holder left read its folder
        tg.cancel_scope.cancel()


async def test_mail_reaches_holders_when_the_next_watcher_leaves_too(tmp_path: Path) -> None:
    mailbox = tmp_path / "mailbox"
    holders = Holders(fc.FileControlChannel(mailbox))
    async with anyio.create_task_group() as tg:
        await holders.hold(tg, 4)
        await ticks()
        # The watcher and the holder it hands the watch to end in the same step.
        holders.scopes[0].cancel()
        holders.scopes[1].cancel()
        await ticks()
        left = folders(mailbox)
        assert len(left) == 2  # holders 2 and 3
        for i, folder in enumerate(left):
            mail_from_another_process(mailbox, folder, {"command": "interrupt", "n": i})
        with anyio.fail_after(10):
            while not (holders.got[2] and holders.got[3]):
                await ticks(1)
        assert sorted(c["n"] for got in holders.got[2:] for c in got) == [0, 1]  # type: ignore[type-var]
        assert holders.got[0] == holders.got[1] == []
        tg.cancel_scope.cancel()
