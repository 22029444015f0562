"""A follower's side of a fetch session: what each request carries, and the fall back to full fetches."""

from __future__ import annotations

from odradek.broker.fetch_session_client import FetchSessionHandler, PartitionFetch
from odradek.errors import ErrorCode
from odradek.placement.model import TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def at(offset: int, epoch: int = 1) -> PartitionFetch:
    return PartitionFetch(offset, 0, 1 << 20, epoch)


def established(sid: int = 42) -> FetchSessionHandler:
    h = FetchSessionHandler()
    first = h.build({A0: at(0), A1: at(0)})
    assert first.full and first.session_id == 0 and set(first.to_send) == {A0, A1}
    assert h.handle_response(first, 0, sid)
    assert (h.session_id, h.epoch) == (sid, 1)
    return h


def test_after_the_full_fetch_only_changes_additions_and_removals_are_sent() -> None:
    h = established()
    quiet = h.build({A0: at(0), A1: at(0)})
    assert (quiet.full, quiet.session_id, quiet.epoch, quiet.to_send, quiet.forgotten) == (False, 42, 1, {}, [])
    assert h.handle_response(quiet, 0, 42) and h.epoch == 2
    moved = h.build({A0: at(5), A1: at(0), B0: at(0)})
    assert moved.to_send == {A0: at(5), B0: at(0)} and moved.forgotten == []
    h.handle_response(moved, 0, 42)
    fenced = h.build({A0: at(5, epoch=2), B0: at(0)})  # a new leader epoch is a change too; A1 leaves
    assert fenced.to_send == {A0: at(5, epoch=2)} and fenced.forgotten == [A1]
    assert fenced.epoch == 3


def test_an_unknown_session_starts_over_without_an_id() -> None:
    h = established()
    req = h.build({A0: at(3), A1: at(0)})
    assert not h.handle_response(req, int(ErrorCode.fetch_session_id_not_found), 0)
    full = h.build({A0: at(3), A1: at(0)})
    assert full.full and full.session_id == 0 and set(full.to_send) == {A0, A1}


def test_a_wrong_epoch_closes_the_session_in_the_next_full_fetch() -> None:
    h = established()
    req = h.build({A0: at(0), A1: at(0)})
    assert not h.handle_response(req, int(ErrorCode.invalid_fetch_session_epoch), 0)
    full = h.build({A0: at(0), A1: at(0)})
    assert full.full and full.session_id == 42 and len(full.to_send) == 2
    assert h.handle_response(full, 0, 77) and (h.session_id, h.epoch) == (77, 1)


def test_a_failed_request_makes_the_next_fetch_full() -> None:
    h = established()
    h.build({A0: at(9), A1: at(0)})
    h.handle_error()
    again = h.build({A0: at(9), A1: at(0)})
    assert again.full and again.session_id == 42 and len(again.to_send) == 2


def test_a_leader_without_sessions_gets_full_fetches_that_keep_asking() -> None:
    h = FetchSessionHandler()
    for _ in range(3):
        req = h.build({A0: at(0)})
        assert req.full and req.session_id == 0 and req.to_send == {A0: at(0)}
        assert h.handle_response(req, 0, 0)


def test_a_session_the_leader_closed_is_not_continued() -> None:
    h = established()
    req = h.build({A0: at(0)})  # A1 forgotten ...
    assert h.handle_response(req, 0, 0)  # ... and the leader answered sessionless
    assert h.build({A0: at(0)}).full
