"""Run brokers in this process until SIGINT or SIGTERM, then shut them down cleanly (flush, checkpoints)."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from pathlib import Path

from odradek.broker.config import BrokerConfig
from odradek.broker.server import Broker

log = logging.getLogger(__name__)


async def run_broker(config: BrokerConfig, ready_file: Path | None) -> None:
    broker = Broker(config)
    await broker.start()
    line = f"bootstrap.servers={broker.host}:{broker.port}"
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(line, flush=True)
    if ready_file is not None:
        tmp = ready_file.with_suffix(ready_file.suffix + ".tmp")
        tmp.write_text(line + "\n")
        tmp.replace(ready_file)
    try:
        await stop.wait()
        log.info("signal received: shutting down")
    finally:
        await broker.stop()


def configure_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
