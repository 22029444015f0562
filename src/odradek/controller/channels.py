"""Per-broker channels (seed 001 section 2, ``ControllerChannelManager``): one queue and one sender task each.

A sender sends its broker's requests one at a time, in the order they were queued, and retries a failed send with
exponential backoff for as long as the broker is registered; removing the broker (it died, or the controller
resigned) cancels the sender and drops what was queued, exactly as Kafka's ``removeBroker`` does. The network is an
injected :class:`Transport`, so tests can play brokers in-process and the cluster can use TCP
(:class:`odradek.controller.transport.TcpTransport`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from odradek.coordination.znodes import Endpoint
from odradek.protocol.controller_requests import decode_response, encode_body

__all__ = ["LARGE_REQUEST_PARTITIONS", "ChannelManager", "ResponseCallback", "Transport"]

LARGE_REQUEST_PARTITIONS = 2_000

log = logging.getLogger(__name__)


class Transport(Protocol):
    async def send(self, broker_id: int, endpoint: Endpoint, api_key: int, body: bytes) -> bytes:
        """Send one request body (see :mod:`odradek.protocol.controller_requests`) and return the response body."""
        ...


ResponseCallback = Callable[[int, Any], None]
"""Called on the controller's loop with (broker id, decoded response)."""


@dataclass(slots=True)
class _Item:
    api_key: int
    request: Any
    callback: ResponseCallback | None


class _Channel:
    def __init__(self, broker_id: int, endpoint: Endpoint) -> None:
        self.broker_id = broker_id
        self.endpoint = endpoint
        self.queue: asyncio.Queue[_Item] = asyncio.Queue()
        self.busy = False
        self.task: asyncio.Task[None] | None = None


class ChannelManager:
    def __init__(
        self,
        transport: Transport,
        *,
        retry_backoff_ms: int = 100,
        max_backoff_ms: int = 2_000,
        request_timeout_ms: int = 30_000,
    ) -> None:
        self._transport = transport
        self._backoff_s = retry_backoff_ms / 1000
        self._max_backoff_s = max_backoff_ms / 1000
        self._timeout_s = request_timeout_ms / 1000
        self._channels: dict[int, _Channel] = {}
        self._stopping: set[asyncio.Task[None]] = set()

    @property
    def brokers(self) -> set[int]:
        return set(self._channels)

    def add_broker(self, broker_id: int, endpoint: Endpoint) -> None:
        if broker_id in self._channels:
            return
        channel = _Channel(broker_id, endpoint)
        channel.task = asyncio.get_running_loop().create_task(
            self._sender(channel), name=f"controller-to-broker-{broker_id}"
        )
        self._channels[broker_id] = channel

    def remove_broker(self, broker_id: int) -> None:
        channel = self._channels.pop(broker_id, None)
        if channel is not None and channel.task is not None:
            channel.task.cancel()
            self._stopping.add(channel.task)
            channel.task.add_done_callback(self._stopping.discard)

    def send(self, broker_id: int, api_key: int, request: Any, callback: ResponseCallback | None = None) -> bool:
        """Queue a request; False when there is no channel to that broker (it is not live)."""
        channel = self._channels.get(broker_id)
        if channel is None:
            log.debug("no channel to broker %d; dropping request %d", broker_id, api_key)
            return False
        channel.queue.put_nowait(_Item(api_key, request, callback))
        return True

    def idle(self) -> bool:
        """Nothing queued or in flight on any channel."""
        return all(c.queue.empty() and not c.busy for c in self._channels.values())

    async def close(self) -> None:
        """Stop every sender, including those of brokers removed earlier, and wait until they have ended."""
        for broker_id in list(self._channels):
            self.remove_broker(broker_id)
        tasks = set(self._stopping)
        if tasks:
            await asyncio.wait(tasks)  # unlike awaiting them, never swallows our own cancellation

    async def _sender(self, channel: _Channel) -> None:
        while True:
            item = await channel.queue.get()
            channel.busy = True
            try:
                try:
                    if len(getattr(item.request, "partition_states", ())) > LARGE_REQUEST_PARTITIONS:
                        # Encoding 100,000 partition states takes about a second: off the event loop, so the
                        # coordination session's pings and the broker's clients keep being served meanwhile.
                        body = await asyncio.to_thread(encode_body, item.request)
                    else:
                        body = encode_body(item.request)
                except ValueError:
                    # Something Kafka's format cannot carry (a listener with no security protocol id, say): no
                    # retry can send it, and the requests queued behind it must still go.
                    log.exception("request %d to broker %d cannot be encoded; dropped", item.api_key,
                                  channel.broker_id)
                    continue
                backoff = self._backoff_s
                while True:
                    try:
                        # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancellation that
                        # races with completion, and removing a broker must always stop its sender.
                        async with asyncio.timeout(self._timeout_s):
                            raw = await self._transport.send(
                                channel.broker_id, channel.endpoint, item.api_key, body)
                        response = decode_response(item.api_key, raw)
                        break
                    except asyncio.CancelledError:
                        raise
                    except Exception as exc:  # the broker may be restarting: retry while it is registered
                        log.warning(
                            "request %d to broker %d failed (%s); retrying in %.2fs",
                            item.api_key, channel.broker_id, exc, backoff,
                        )
                        await asyncio.sleep(backoff)
                        backoff = min(backoff * 2, self._max_backoff_s)
                if item.callback is not None:
                    try:
                        item.callback(channel.broker_id, response)
                    except Exception:
                        log.exception("response callback for request %d failed", item.api_key)
            finally:
                channel.busy = False
