"""Shared fixtures and helpers for the agentkit test suite."""

from __future__ import annotations

import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
NODE_SERVERS = ROOT / "tests" / "servers" / "node_modules" / "@modelcontextprotocol"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
