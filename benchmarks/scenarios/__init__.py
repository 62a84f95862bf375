"""Benchmark scenarios; each module has ``async def run(cfg) -> list[Row]``."""
