"""The quota arithmetic and precedence against the vectors of Kafka's ClientQuotaManagerTest and SanitizerTest."""

from __future__ import annotations

import math
import re

import pytest

from odradek.broker.quota_rate import Rate, throttle_time_ms
from odradek.broker.quotas import (
    DEFAULT,
    ClientQuotaManager,
    ClientQuotas,
    QuotaEntity,
    desanitize,
    quota_text,
    quota_values,
    sanitize,
)

SAMPLES = 11  # Kafka's quota.window.num default


class Time:
    """Kafka's MockTime for these tests: milliseconds that move only when told."""

    def __init__(self) -> None:
        self.ms = 1_000_000

    def sleep(self, ms: int) -> None:
        self.ms += ms


def _entity(user: str | None, client: str | None) -> QuotaEntity:
    return QuotaEntity(user, client)


def _check(manager: ClientQuotaManager, time: Time, user: str, client: str, bound: float, value: float,
           throttled: bool) -> None:
    """ClientQuotaManagerTest.checkQuota: the bound, the max value in a window, and whether ``value * samples``
    recorded at once is throttled."""
    assert manager.quota(user, client) == bound
    assert manager.max_value_in_quota_window(user, client) == pytest.approx(bound * (SAMPLES - 1))
    throttle = manager.record_and_get_throttle_ms(user, client, value * SAMPLES, time.ms)
    assert (throttle > 0) is throttled, (user, client, bound, value, throttle)


def test_quota_violation_throttles_2100_ms_as_kafka() -> None:
    """ClientQuotaManagerTest.testQuotaViolation: 400 B/s for ten seconds under a 500 B/s default client-id quota,
    then a 2300-byte spike half a second later: (6300 / 10.5 - 500) / 500 * 10.5 s = 2100 ms."""
    time = Time()
    manager = ClientQuotaManager(SAMPLES, 1000)
    manager.update_quota(_entity(None, DEFAULT), 500)
    for _ in range(10):
        assert manager.record_and_get_throttle_ms("ANONYMOUS", "unknown", 400, time.ms) == 0
        time.sleep(1000)
    time.sleep(500)
    assert manager.record_and_get_throttle_ms("ANONYMOUS", "unknown", 2300, time.ms) == 2100
    time.sleep(2100)
    for _ in range(10):
        manager.record_and_get_throttle_ms("ANONYMOUS", "unknown", 400, time.ms)
        time.sleep(1000)
    assert manager.record_and_get_throttle_ms("ANONYMOUS", "unknown", 0, time.ms) == 0


def test_quota_config_precedence_as_kafka() -> None:
    """ClientQuotaManagerTest.testQuotaConfigPrecedence, step by step (time does not move)."""
    time = Time()
    m = ClientQuotaManager(SAMPLES, 1000)
    m.update_quota(_entity(DEFAULT, None), 1000)
    m.update_quota(_entity(None, DEFAULT), 2000)
    m.update_quota(_entity(DEFAULT, DEFAULT), 3000)
    m.update_quota(_entity("userA", None), 4000)
    m.update_quota(_entity("userA", "client1"), 5000)
    m.update_quota(_entity("userB", None), 6000)
    m.update_quota(_entity("userB", "client1"), 7000)
    m.update_quota(_entity("userB", DEFAULT), 8000)
    m.update_quota(_entity("userC", None), 10000)
    m.update_quota(_entity(None, "client1"), 9000)

    _check(m, time, "userA", "client1", 5000, 4500, False)  # <user, client> before <user>
    _check(m, time, "userA", "client2", 4000, 4500, True)  # <user> before <client> and the defaults
    _check(m, time, "userA", "client3", 4000, 0, True)  # <user> is shared across the user's clients
    _check(m, time, "userA", "client1", 5000, 0, False)  # <user, client> is its own
    _check(m, time, "userB", "client1", 7000, 8000, True)
    _check(m, time, "userB", "client2", 8000, 7000, False)  # <user, default client> for each client alone
    _check(m, time, "userB", "client3", 8000, 7000, False)
    _check(m, time, "userD", "client1", 3000, 3500, True)  # <default user, default client>
    _check(m, time, "userD", "client2", 3000, 2500, False)
    _check(m, time, "userE", "client1", 3000, 2500, False)

    m.update_quota(_entity(DEFAULT, DEFAULT), None)  # back to the <user> default
    _check(m, time, "userD", "client1", 1000, 0, False)  # the tags changed: a new count
    _check(m, time, "userE", "client4", 1000, 1500, True)
    _check(m, time, "userF", "client4", 1000, 800, False)  # the default <user> quota is shared by the user's clients
    _check(m, time, "userF", "client5", 1000, 800, True)

    m.update_quota(_entity(DEFAULT, None), None)  # back to the <client-id> default
    _check(m, time, "userF", "client4", 2000, 0, False)
    _check(m, time, "userF", "client5", 2000, 0, False)
    _check(m, time, "userF", "client5", 2000, 2500, True)
    _check(m, time, "userG", "client5", 2000, 0, True)  # the client-id default is shared by every user

    m.update_quota(_entity("userA", None), 8000)
    m.update_quota(_entity("userA", "client1"), 10000)
    _check(m, time, "userA", "client2", 8000, 0, False)
    _check(m, time, "userA", "client2", 8000, 4500, True)  # the sum of new and earlier values
    _check(m, time, "userA", "client1", 10000, 0, False)
    _check(m, time, "userA", "client1", 10000, 6000, True)
    m.update_quota(_entity("userA", "client1"), None)
    _check(m, time, "userA", "client6", 8000, 0, True)  # the shared user quota
    m.update_quota(_entity("userA", "client6"), 11000)
    _check(m, time, "userA", "client6", 11000, 8500, False)
    m.update_quota(_entity("userA", DEFAULT), 12000)
    m.update_quota(_entity("userA", "client6"), None)
    _check(m, time, "userA", "client6", 12000, 4000, True)


@pytest.mark.parametrize(
    "quota_user,quota_client,user,client",
    [
        (None, "p1", "ANONYMOUS", "p1"),  # testClientIdQuotaParsing
        ("User1", None, "User1", "p1"),  # testUserQuotaParsing
        ("User1", "p1", "User1", "p1"),  # testUserClientIdQuotaParsing
    ],
)
def test_quota_parsing_as_kafka(quota_user: str | None, quota_client: str | None, user: str, client: str) -> None:
    """ClientQuotaManagerTest.testQuotaParsing: overrides apply at once to an existing sensor, removing one falls
    back to the default, and a client without any quota is never throttled."""
    time = Time()
    m = ClientQuotaManager(SAMPLES, 1000)
    m.update_quota(_entity(quota_user, quota_client), 2000)
    assert m.quota("RandomUser", "random-client-id") is None
    assert m.quota(user, client) == 2000
    assert m.record_and_get_throttle_ms(user, client, 2500 * SAMPLES, time.ms) > 0
    m.update_quota(_entity(quota_user, quota_client), 3000)
    assert m.record_and_get_throttle_ms(user, client, 0, time.ms) == 0
    m.update_quota(_entity(quota_user, quota_client), 500)
    assert m.record_and_get_throttle_ms(user, client, 0, time.ms) > 0
    m.update_quota(_entity(quota_user, quota_client), None)
    default = _entity(DEFAULT if quota_user else None, DEFAULT if quota_client else None)
    m.update_quota(default, 4000)
    assert m.quota(user, client) == 4000
    assert m.record_and_get_throttle_ms(user, client, 1000 * SAMPLES, time.ms) == 0


def test_max_value_in_quota_window_with_three_windows() -> None:
    """testGetMaxValueInQuotaWindowWithNonDefaultQuotaWindow: 3 whole windows (4 samples) of a 10 B/s quota."""
    m = ClientQuotaManager(4, 1000)
    assert m.max_value_in_quota_window("userA", "client1") == math.inf
    m.update_quota(_entity(DEFAULT, None), 10)
    assert m.max_value_in_quota_window("userA", "client1") == 30


def test_nothing_is_recorded_before_a_quota_exists() -> None:
    m = ClientQuotaManager(SAMPLES, 1000)
    assert not m.enabled
    assert m.record_and_get_throttle_ms("u", "c", 1e12, 0) == 0
    m.update_quota(_entity("someone-else", None), 1)
    assert m.record_and_get_throttle_ms("u", "c", 1e12, 0) == 0  # no quota applies to u/c


def test_unrecord_takes_a_throttled_fetch_back() -> None:
    m = ClientQuotaManager(SAMPLES, 1000)
    m.update_quota(_entity(None, DEFAULT), 100)
    assert m.record_and_get_throttle_ms("u", "c", 1000, 0) == 0  # 1000 B over a 10 s window: 100 B/s
    assert m.record_and_get_throttle_ms("u", "c", 500, 0) == 5000  # 150 B/s: (150 - 100) / 100 * 10 s
    m.unrecord("u", "c", 500, 0)
    assert m.record_and_get_throttle_ms("u", "c", 0, 0) == 0


def test_rate_window_and_expiry() -> None:
    """The rate spans at least samples - 1 windows; a sample idle for samples windows is reset."""
    rate = Rate(11, 1000)
    rate.record(1000, 0)
    assert rate.window_size(0) == 10_000
    assert rate.measure(0) == 100
    assert rate.window_size(5_500) == 10_500  # 5.5 s elapsed: five whole windows added to reach ten
    assert rate.measure(10_999) == pytest.approx(1000 / 10.999)
    assert rate.measure(11_000) == 0  # its last event is 11 windows old: reset
    assert throttle_time_ms(600, 500, 10_500) == 2100
    assert throttle_time_ms(1, 0, 10_000) == 10_000


def test_sanitize_as_kafka() -> None:
    """SanitizerTest.testSanitize, and Java URLEncoder's exact output for the characters Kafka rewrites."""
    principal = "CN=Some characters !@#$%&*()_-+=';:,/~"
    sanitized = sanitize(principal)
    assert re.fullmatch(r"[a-zA-Z0-9._\-]+", sanitized.replace("%", "_"))
    assert desanitize(sanitized) == principal
    assert sanitize("a b*c~d.e-f_g") == "a%20b%2Ac%7Ed.e-f_g"
    assert sanitize("ANONYMOUS") == "ANONYMOUS"
    assert sanitize("<default>") == "%3Cdefault%3E"  # a real name never reads as the default
    assert desanitize("a+b") == "a b"


def test_entity_paths_round_trip() -> None:
    for entity in (QuotaEntity("alice", None), QuotaEntity(None, DEFAULT), QuotaEntity(DEFAULT, "app")):
        assert QuotaEntity.from_path(entity.path) == entity
    assert QuotaEntity("alice", "app").path == "users/alice/clients/app"
    assert QuotaEntity.from_path("topics/t") is None
    assert QuotaEntity.from_path("users/alice/clients") is None


def test_stored_values_as_kafka_writes_them() -> None:
    assert quota_text("producer_byte_rate", 1024.0) == "1024"
    assert quota_text("producer_byte_rate", 1024.0000001) == "1024"
    with pytest.raises(ValueError, match="must be a LONG value"):
        quota_text("consumer_byte_rate", 10.5)
    assert quota_text("request_percentage", 25) == "25.0"
    for bad in (math.nan, math.inf, 2.0**64):
        with pytest.raises(ValueError):
            quota_text("producer_byte_rate", bad)
    with pytest.raises(ValueError, match="finite"):
        quota_text("request_percentage", math.nan)
    assert quota_values({"producer_byte_rate": "1024", "SCRAM-SHA-256": "salt=..."}) == {"producer_byte_rate": 1024.0}


def test_entity_config_feeds_each_manager() -> None:
    quotas = ClientQuotas.create()
    entity = QuotaEntity("alice", None)
    quotas.apply_entity_config(entity, {"producer_byte_rate": "1024", "consumer_byte_rate": "2048",
                                        "SCRAM-SHA-512": "salt=x,stored_key=y"})
    assert quotas.produce.quota("alice", "any") == 1024
    assert quotas.fetch.quota("alice", "any") == 2048
    assert quotas.request.quota("alice", "any") is None
    quotas.apply_entity_config(entity, {"consumer_byte_rate": "4096"})
    assert quotas.produce.quota("alice", "any") is None
    assert quotas.fetch.quota("alice", "any") == 4096
