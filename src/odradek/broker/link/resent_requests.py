"""A big controller request sent again after its timeout is answered by its first application, not applied twice.

The controller's channel to a broker is a queue sent in order, and a request whose answer does not come within
``controller.socket.timeout.ms`` (30 s) is sent again on a new connection, as Kafka's RequestSendThread does. A
LeaderAndIsr of 100,000 partitions can take a busy broker longer than that to apply (it opens a log for each new
replica), so the resend arrives while the first copy is still being applied; decoding and applying it again costs
seconds of event loop each time, which makes the next resend more likely still. A resend is byte for byte the same
body (only the header's correlation id differs), and nothing else from the controller can come between the two,
since its queue waits on the first. So the broker remembers the body of the last controller request, if big, and
answers a byte-identical one with the first's response, once that is ready. Any other controller request (the
queue has moved on, or another controller speaks) forgets it.
"""

from __future__ import annotations

import asyncio

LARGE_BODY = 1 << 18
"""Bodies above this (about 5,000 partitions) are remembered (smaller ones are cheap enough to apply again) and
decoded off the event loop."""


class ResentRequests:
    def __init__(self) -> None:
        self._last: tuple[int, bytes, asyncio.Future[bytes]] | None = None

    def first_of(self, api_key: int, body: bytes | memoryview) -> asyncio.Future[bytes] | None:
        """The encoded response (possibly still to come) of the previous controller request if it had exactly this
        API and body; otherwise None, and the previous request is forgotten."""
        last = self._last
        if last is not None and last[0] == api_key and last[1] == body:
            return last[2]
        self._last = None
        return None

    def begin(self, api_key: int, body: bytes | memoryview) -> asyncio.Future[bytes] | None:
        """Remember a request about to be applied, if big; the caller sets the future to its encoded response."""
        if len(body) <= LARGE_BODY:
            return None
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._last = (api_key, bytes(body), future)
        return future

    def abandon(self, future: asyncio.Future[bytes]) -> None:
        """The application failed or was cancelled: a resend must be applied afresh."""
        if self._last is not None and self._last[2] is future:
            self._last = None
        if not future.done():
            future.cancel()
