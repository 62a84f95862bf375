"""One client cannot take the server: at most ``max_runs_per_client`` runs at once per
token (else per peer address), the next answered ``429`` with ``Retry-After``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx2

from agentkit import ReActAgent
from agentkit.serve import create_app
from agentkit.session import SQLiteSession
from agentkit.testing import FunctionModel
from tests._serve_helpers import run_input, running, stream_into, user, wait_for


async def test_runs_over_the_per_client_cap_get_429_and_other_clients_still_run(
    tmp_path: Path,
) -> None:
    release = anyio.Event()

    async def answer(messages: Any, info: Any) -> str:
        await release.wait()  # every run stays live until the test lets it end
        return "Done."

    agent = ReActAgent("a", "s", FunctionModel(answer))
    tokens = {"tok-alice": "alice", "tok-bob": "bob"}
    app = create_app(
        agent, sessions=SQLiteSession(tmp_path / "t.db"), auth_token=tokens, max_runs_per_client=2
    )
    alice = {"Authorization": "Bearer tok-alice"}
    bob = {"Authorization": "Bearer tok-bob"}
    async with running(app) as base, anyio.create_task_group() as tg:
        a = httpx2.AsyncClient(base_url=base, headers=alice)
        b = httpx2.AsyncClient(base_url=base, headers=bob)
        sinks: list[list[dict[str, Any]]] = [[], [], []]
        for i, (client, thread) in enumerate([(a, "a1"), (a, "a2"), (b, "b1")]):
            tg.start_soon(stream_into, client, "/agui", run_input(thread, user("hi")), sinks[i])
        with anyio.fail_after(20):
            for sink in sinks:
                await wait_for(sink, "RUN_STARTED")
        refused = await a.post("/agui", json=run_input("a3", user("one more")))
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "too_many_runs"
        assert int(refused.headers["retry-after"]) >= 1
        assert (await a.get("/threads/a3")).status_code == 404  # nothing was started or stored
        release.set()
        with anyio.fail_after(20):
            for sink in sinks:
                await wait_for(sink, "RUN_FINISHED")
            # Reading a thread waits until its run is saved: then its slot is back.
            for thread in ("a1", "a2"):
                assert (await a.get(f"/threads/{thread}")).json()["running"] is False
        again = await a.post("/agui", json=run_input("a3", user("now")))
        assert again.status_code == 200
        await a.aclose()
        await b.aclose()
