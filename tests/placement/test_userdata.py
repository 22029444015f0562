"""Sticky assignor user data: Kafka's byte layout, its versions and its failure conventions."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from odradek.placement import (
    TopicPartition,
    decode_cooperative_user_data,
    decode_sticky_user_data,
    encode_cooperative_user_data,
    encode_sticky_user_data,
)
from odradek.placement.sticky_userdata import decode_sticky_user_data_ids


def test_version_1_layout_is_kafkas() -> None:
    data = encode_sticky_user_data([TopicPartition("t1", 0), TopicPartition("t1", 2), TopicPartition("t", 5)], 7)
    expected = (
        struct.pack(">i", 2)
        + struct.pack(">h", 2)
        + b"t1"
        + struct.pack(">iii", 2, 0, 2)
        + struct.pack(">h", 1)
        + b"t"
        + struct.pack(">ii", 1, 5)
        + struct.pack(">i", 7)
    )
    assert data == expected


def test_versions_and_failures() -> None:
    parts = [TopicPartition("a", 1), TopicPartition("b", 0)]
    assert decode_sticky_user_data(encode_sticky_user_data(parts, 3)) == (parts, 3)
    assert decode_sticky_user_data(encode_sticky_user_data(parts)) == (parts, None)  # version 0
    assert decode_sticky_user_data(None) == ([], None)
    assert decode_sticky_user_data(b"") == ([], None)
    assert decode_sticky_user_data(b"\x00\x00\x00\x05\x00") == ([], -1)  # truncated
    assert decode_sticky_user_data(b"\xff\xff\xff\xff") == ([], -1)  # negative array size
    assert decode_cooperative_user_data(encode_cooperative_user_data(9)) == 9
    assert decode_cooperative_user_data(None) is None
    assert decode_cooperative_user_data(b"\x01") == -1


@given(
    st.lists(st.tuples(st.sampled_from(["a", "bb", "ccc", "gone"]), st.integers(0, 12)), max_size=30),
    st.one_of(st.none(), st.integers(-1, 50)),
    st.integers(0, 40),
)
def test_id_decoder_agrees_with_the_plain_decoder(pairs, generation, cut) -> None:  # type: ignore[no-untyped-def]
    """The fast id decoder gives the plain decoder's answer (restricted to known partitions), also on truncated
    data."""
    data = encode_sticky_user_data([TopicPartition(t, p) for t, p in pairs], generation)
    if cut:
        data = data[: max(0, len(data) - cut)]
    counts = {"a": 10, "bb": 3, "ccc": 13}
    bases = {"a": 0, "bb": 10, "ccc": 13}
    index = {t.encode(): (bases[t], n) for t, n in counts.items()}
    plain, plain_generation = decode_sticky_user_data(data)
    ids, ids_generation = decode_sticky_user_data_ids(data, index)
    assert ids_generation == plain_generation
    assert ids == [
        bases[tp.topic] + tp.partition for tp in plain if tp.topic in counts and tp.partition < counts[tp.topic]
    ]
