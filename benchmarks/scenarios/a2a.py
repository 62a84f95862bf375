"""A2A round-trip overhead per message vs the AG-UI endpoint (see ``benchmarks.a2a_roundtrip``)."""

from __future__ import annotations

from benchmarks.a2a_roundtrip import run

__all__ = ["run"]
