"""A fetcher's side of an incremental fetch session (KIP-227), as Kafka's FetchSessionHandler keeps it.

A follower fetching thousands of partitions from one leader sends them all once (a full fetch with epoch 0, which
asks the leader for a session); once the leader answers with a session id, each next request carries only the
partitions whose fetch state changed since the last one sent (usually those the previous response brought records
for), the ones added since, and the ones to forget. The leader reads the rest from the session.

Any doubt about what the leader holds falls back to a full fetch: a session error (FETCH_SESSION_ID_NOT_FOUND starts
from nothing; INVALID_FETCH_SESSION_EPOCH and the rest close the session by naming it in the full fetch), a failed
request (its response may have been lost, so the leader's epoch is unknown), or a full answer without a session id
(the leader has no slot, or sessions turned off: every request stays full, each asking again).

Pure state: :mod:`odradek.broker.fetcher` sends the requests.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from odradek.broker.fetch_sessions import INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch
from odradek.errors import ErrorCode
from odradek.placement.model import TopicPartition


class PartitionFetch(NamedTuple):
    """What a fetch asks of one partition; any change to it is sent in the next incremental request."""

    fetch_offset: int
    log_start_offset: int
    max_bytes: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class FetchRequestData:
    session_id: int
    epoch: int
    to_send: dict[TopicPartition, PartitionFetch]
    forgotten: list[TopicPartition]

    @property
    def full(self) -> bool:
        return self.epoch == INITIAL_EPOCH


class FetchSessionHandler:
    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self._sent: dict[TopicPartition, PartitionFetch] = {}
        """The partitions the leader's session holds, as last sent (valid while the session is)."""
        self._pending: dict[TopicPartition, PartitionFetch] | None = None
        """A full request's partitions, which the session holds once it is answered."""

    def build(self, wanted: Mapping[TopicPartition, PartitionFetch],
              changed: Iterable[TopicPartition] | None = None) -> FetchRequestData:
        """The next request for ``wanted`` (every partition this fetcher fetches now): whole when there is no
        session, else only what differs from what the session holds. ``changed``, when given, names every partition
        whose entry in ``wanted`` may differ from what was last sent (added, changed or gone): only those are
        compared, so an idle fetcher's request costs nothing per partition."""
        if self.epoch == INITIAL_EPOCH:
            self._pending = dict(wanted)
            return FetchRequestData(self.session_id, INITIAL_EPOCH, self._pending, [])
        self._pending = None
        sent = self._sent
        if changed is None:
            to_send = {tp: f for tp, f in wanted.items() if sent.get(tp) != f}
            forgotten = [tp for tp in sent if tp not in wanted]
        else:
            to_send, forgotten = {}, []
            for tp in changed:
                f = wanted.get(tp)
                if f is None:
                    if tp in sent:
                        forgotten.append(tp)
                elif sent.get(tp) != f:
                    to_send[tp] = f
        return FetchRequestData(self.session_id, self.epoch, to_send, forgotten)

    def handle_response(self, request: FetchRequestData, error_code: int, session_id: int) -> bool:
        """Take the leader's answer to ``request``; False when it was a session error (no partitions in it) and the
        next request must be full."""
        pending, self._pending = self._pending, None
        if error_code != ErrorCode.none:
            if error_code == ErrorCode.fetch_session_id_not_found:
                self.session_id = INVALID_SESSION_ID
            self.epoch = INITIAL_EPOCH  # a full fetch naming the session closes it on the leader
            return False
        if session_id == INVALID_SESSION_ID or (not request.full and session_id != self.session_id):
            # no session (none created, or the leader closed it): the next fetch is full and asks again
            self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
            return True
        if request.full:
            self._sent = pending or {}
            self.session_id, self.epoch = session_id, next_epoch(INITIAL_EPOCH)
        else:
            self._sent.update(request.to_send)
            for tp in request.forgotten:
                self._sent.pop(tp, None)
            self.epoch = next_epoch(self.epoch)
        return True

    def handle_error(self) -> None:
        """The request failed before a whole response came: what the leader's session holds is unknown."""
        self._pending = None
        self.epoch = INITIAL_EPOCH
