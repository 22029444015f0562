"""What a broker does with requests it cannot serve: versions beyond its range (ApiVersions answers with its v0
response and UNSUPPORTED_VERSION, KIP-511; any other API closes the connection), unknown API keys, and bodies
that do not parse."""

from __future__ import annotations

from differential_corpus import Call, Scenario

SCENARIOS = [
    Scenario("api-versions.v99.unsupported", Call(18, 99), raw=b""),
    Scenario("api-versions.v4.empty-body", Call(18, 4), raw=b""),
    Scenario("metadata.v99.unsupported", Call(3, 99), raw=b"\x00\x00\x00\x00"),
    Scenario("produce.v99.unsupported", Call(0, 99), raw=b"\x00"),
    Scenario("fetch.v99.unsupported", Call(1, 99), raw=b"\x00"),
    Scenario("unknown-api-key.v0", Call(999, 0), raw=b""),
    Scenario("metadata.v12.truncated-body", Call(3, 12), raw=b"\x02"),
    Scenario("metadata.v1.truncated-body", Call(3, 1), raw=b"\x00\x00"),
    Scenario("produce.v9.garbage-body", Call(0, 9), raw=b"\xff" * 7),
    Scenario("find-coordinator.v3.truncated-body", Call(10, 3), raw=b"\x03g"),
    Scenario("create-topics.v7.negative-array", Call(19, 7), raw=b"\x00\x00\x00\x00\x00"),
    Scenario("join-group.v5.huge-string-length", Call(11, 5), raw=b"\x7f\xff" + b"x" * 10),
]
