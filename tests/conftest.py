"""Shared fixtures and helpers for the agentkit test suite."""

from __future__ import annotations

import pathlib

import pytest

# Real Redis / PostgreSQL servers (session-scoped fixtures ``redis_url``, ``postgres_url``).
pytest_plugins = ["tests._session_servers"]

ROOT = pathlib.Path(__file__).resolve().parent.parent
NODE_SERVERS = ROOT / "tests" / "servers" / "node_modules" / "@modelcontextprotocol"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
