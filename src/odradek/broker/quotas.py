"""Client quotas as Kafka's ClientQuotaManager keeps them: overrides per entity, which one applies, and who shares
a sensor.

Quotas are set on ``user``, ``client-id`` and ``(user, client-id)`` entities, each name possibly ``<default>``.
Names are kept as they are in ZooKeeper paths (Kafka's ``Sanitizer``: URL-encoded, ``*`` as ``%2A``, a space as
``%20``), so ``<default>`` can never collide with a real name. For a request by ``(user, client-id)`` the most
specific quota applies, in Kafka's order::

    /config/users/<user>/clients/<client-id>    /config/users/<default>/clients/<client-id>
    /config/users/<user>/clients/<default>      /config/users/<default>/clients/<default>
    /config/users/<user>                        /config/users/<default>
    /config/clients/<client-id>                 /config/clients/<default>

(left column before right, top to bottom within a column). The level that applies also decides who shares the
byte count: a ``<user>`` quota is shared by all of that user's client ids, a ``<client-id>`` quota by every user
of that client id, a ``(user, client-id)`` quota belongs to that pair alone. Kafka expresses this as the sensor's
metric tags, ``(user, "")``, ``("", client-id)`` or ``(user, client-id)``; so do we.

Pure: the time comes in as an argument; the broker passes its clock's reading.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import quote, unquote_plus

from odradek.broker.quota_rate import Rate, throttle_time_ms

DEFAULT = "<default>"
"""ZooKeeper's name for a default entity (Kafka's ``ZooKeeperInternals.DEFAULT_STRING``)."""

USER, CLIENT_ID, IP = "user", "client-id", "ip"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"

QUOTA_KEYS: Mapping[str, type] = {
    PRODUCER_BYTE_RATE: int,
    CONSUMER_BYTE_RATE: int,
    REQUEST_PERCENTAGE: float,
    CONTROLLER_MUTATION_RATE: float,
}
"""Kafka's QuotaConfig.userAndClientQuotaConfigs: the keys of a user or client-id entity that are quotas (LONG and
DOUBLE). A user's znode also holds SCRAM credentials, which are not quotas and never touched here."""

SENSOR_EXPIRY_MS = 3_600_000
"""Kafka's InactiveSensorExpirationTimeSeconds: a sensor nobody recorded to for an hour is dropped."""


@functools.lru_cache(maxsize=4096)
def sanitize(name: str) -> str:
    """Kafka's ``Sanitizer.sanitize``: Java's URLEncoder (letters, digits and ``.-*_`` kept, UTF-8 bytes as
    ``%XX``), then ``*`` as ``%2A`` and the space as ``%20``, so the result is safe as a znode name."""
    return quote(name, safe="", encoding="utf-8").replace("~", "%7E")


def desanitize(name: str) -> str:
    """Kafka's ``Sanitizer.desanitize`` (Java's URLDecoder: ``+`` is a space)."""
    return unquote_plus(name, encoding="utf-8")


def principal_user(principal: str) -> str:
    """The user name of a ``Type:name`` principal, as the quota entity names it (``User:ANONYMOUS`` -> ``ANONYMOUS``,
    which is how Kafka quotas unauthenticated clients)."""
    return principal.split(":", 1)[1] if ":" in principal else principal


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """One quota entity by its sanitized ZooKeeper names; ``None`` where the entity has no such part."""

    user: str | None = None
    client_id: str | None = None

    def __post_init__(self) -> None:
        if self.user is None and self.client_id is None:
            raise ValueError("a quota entity names a user, a client id or both")

    @property
    def path(self) -> str:
        """Its path under ``/config`` (also its change notification's ``entity_path``)."""
        if self.user is None:
            return f"clients/{self.client_id}"
        if self.client_id is None:
            return f"users/{self.user}"
        return f"users/{self.user}/clients/{self.client_id}"

    @classmethod
    def from_path(cls, entity_path: str) -> QuotaEntity | None:
        """The entity of a ``clients/<id>``, ``users/<user>`` or ``users/<user>/clients/<id>`` path, else None."""
        parts = entity_path.split("/")
        if len(parts) == 2 and parts[0] == "clients" and parts[1]:
            return cls(None, parts[1])
        if len(parts) == 2 and parts[0] == "users" and parts[1]:
            return cls(parts[1], None)
        if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients" and parts[1] and parts[3]:
            return cls(parts[1], parts[3])
        return None


# Kafka's QuotaTypes: which levels were ever configured; the sensor tags take a shortcut while only one was.
_CLIENT_ID_ENABLED, _USER_ENABLED, _USER_CLIENT_ID_ENABLED = 1, 2, 4

Tags = tuple[str, str]
"""A sensor's (sanitized user, sanitized client id), either possibly empty: who shares the count."""


@dataclass(slots=True)
class _Sensor:
    rate: Rate
    last_record_ms: int


@dataclass
class ClientQuotaManager:
    """One quota type (produce bytes, fetch bytes, ...): the overrides and the sensors of the clients seen."""

    samples: int = 11
    window_ms: int = 1000
    overrides: dict[QuotaEntity, float] = field(default_factory=dict)
    _enabled: int = 0
    _sensors: dict[Tags, _Sensor] = field(default_factory=dict)
    _last_expiry_ms: int = 0

    @property
    def enabled(self) -> bool:
        """Whether any quota of this type was ever set; until then nothing is recorded (as Kafka)."""
        return self._enabled != 0

    def update_quota(self, entity: QuotaEntity, bound: float | None) -> None:
        """Set (or, with None, remove) the entity's quota; it applies to the next recording, the sensors kept."""
        if entity.user is not None:
            self._enabled |= _USER_CLIENT_ID_ENABLED if entity.client_id is not None else _USER_ENABLED
        else:
            self._enabled |= _CLIENT_ID_ENABLED
        if bound is None:
            self.overrides.pop(entity, None)
        else:
            self.overrides[entity] = bound

    def metric_tags(self, user: str, client_id: str) -> Tags:
        """Kafka's DefaultQuotaCallback.quotaMetricTags for a sanitized user and client id."""
        enabled = self._enabled
        if enabled in (0, _CLIENT_ID_ENABLED):
            return "", client_id
        if enabled == _USER_ENABLED:
            return user, ""
        if enabled == _USER_CLIENT_ID_ENABLED:
            return user, client_id
        has = self.overrides.__contains__
        if (has(QuotaEntity(user, client_id)) or has(QuotaEntity(user, DEFAULT))):
            return user, client_id
        if has(QuotaEntity(user, None)):
            return user, ""
        if has(QuotaEntity(DEFAULT, client_id)) or has(QuotaEntity(DEFAULT, DEFAULT)):
            return user, client_id
        if has(QuotaEntity(DEFAULT, None)):
            return user, ""
        return "", client_id

    def quota_limit(self, tags: Tags) -> float | None:
        """The bound for a sensor's tags, most specific entity first (None: unlimited)."""
        user, client_id = tags
        get = self.overrides.get
        candidates: tuple[tuple[str | None, str | None], ...]
        if user and client_id:
            candidates = ((user, client_id), (user, DEFAULT), (DEFAULT, client_id), (DEFAULT, DEFAULT))
        elif user:
            candidates = ((user, None), (DEFAULT, None))
        elif client_id:
            candidates = ((None, client_id), (None, DEFAULT))
        else:
            return None
        for u, c in candidates:
            bound = get(QuotaEntity(u, c))
            if bound is not None:
                return bound
        return None

    def quota(self, user: str, client_id: str) -> float | None:
        """The bound that applies to a sanitized user and client id (None: unlimited)."""
        return self.quota_limit(self.metric_tags(user, client_id))

    def record_and_get_throttle_ms(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Record ``value`` for the client and return how long it must wait for its rate to come back within the
        quota (0 when it is within, or no quota of this type was ever set)."""
        if not self._enabled:
            return 0
        tags = self.metric_tags(user, client_id)
        sensor = self._sensor(tags, now_ms)
        sensor.rate.record(value, now_ms)
        sensor.last_record_ms = now_ms
        bound = self.quota_limit(tags)
        if bound is None:
            return 0
        rate = sensor.rate.measure(now_ms)
        if rate <= bound:
            return 0
        return throttle_time_ms(rate, bound, sensor.rate.window_size(now_ms))

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back a recording: a throttled fetch returns no data, so its bytes must not count (Kafka's
        unrecordQuotaSensor records the negative value)."""
        if not self._enabled:
            return
        self._sensor(self.metric_tags(user, client_id), now_ms).rate.record(-value, now_ms)

    def max_value_in_quota_window(self, user: str, client_id: str) -> float:
        """The most a client may take in one go without being throttled for sure: its quota times the
        ``samples - 1`` whole windows (Kafka caps a consumer's fetch size with it); unlimited without a quota."""
        if not self._enabled:
            return math.inf
        bound = self.quota(user, client_id)
        if bound is None:
            return math.inf
        return bound * (self.samples - 1) * self.window_ms / 1000.0

    def _sensor(self, tags: Tags, now_ms: int) -> _Sensor:
        sensor = self._sensors.get(tags)
        if sensor is None:
            self._expire(now_ms)
            sensor = self._sensors[tags] = _Sensor(Rate(self.samples, self.window_ms), now_ms)
        return sensor

    def _expire(self, now_ms: int) -> None:
        if now_ms - self._last_expiry_ms < SENSOR_EXPIRY_MS // 60:
            return
        self._last_expiry_ms = now_ms
        for tags in [t for t, s in self._sensors.items() if now_ms - s.last_record_ms >= SENSOR_EXPIRY_MS]:
            del self._sensors[tags]


@dataclass
class ClientQuotas:
    """The broker's quota managers, fed with entity configs as they are read from the store."""

    produce: ClientQuotaManager
    fetch: ClientQuotaManager
    request: ClientQuotaManager
    controller_mutation: ClientQuotaManager

    @classmethod
    def create(cls, samples: int = 11, window_s: int = 1) -> ClientQuotas:
        """Managers of ``samples`` windows of ``window_s`` seconds (``quota.window.num``,
        ``quota.window.size.seconds``; Kafka requires both at least 1)."""
        if samples < 1 or window_s < 1:
            raise ValueError(f"quota.window.num ({samples}) and quota.window.size.seconds ({window_s}) must be >= 1")

        def make() -> ClientQuotaManager:
            return ClientQuotaManager(samples, window_s * 1000)

        return cls(make(), make(), make(), make())

    def apply_entity_config(self, entity: QuotaEntity, config: Mapping[str, str]) -> None:
        """Kafka's QuotaConfigHandler.updateQuotaConfig: each quota key present sets its manager's override for
        the entity, each absent one removes it; other keys (SCRAM credentials) are not ours."""
        for key, manager, kind in (
            (PRODUCER_BYTE_RATE, self.produce, int),
            (CONSUMER_BYTE_RATE, self.fetch, int),
            (REQUEST_PERCENTAGE, self.request, float),
            (CONTROLLER_MUTATION_RATE, self.controller_mutation, float),
        ):
            raw = config.get(key)
            bound: float | None = None
            if raw is not None:
                try:
                    bound = float(int(raw)) if kind is int else float(raw)
                except ValueError:
                    bound = None  # a hand-edited bad value: as if unset
                if bound is not None and math.isnan(bound):
                    bound = None
            manager.update_quota(entity, bound)


def quota_values(config: Mapping[str, str]) -> dict[str, float]:
    """The quota keys of an entity's config as numbers (DescribeClientQuotas' values); bad values are left out."""
    out: dict[str, float] = {}
    for key in QUOTA_KEYS:
        raw = config.get(key)
        if raw is None:
            continue
        try:
            out[key] = float(raw)
        except ValueError:
            continue
    return out


def quota_text(key: str, value: float) -> str:
    """How a quota value is stored, as Kafka's ZkAdminManager writes it: a LONG key must be a whole number (within
    1e-6) and is written as one, a DOUBLE as Java's ``Double.toString`` gives it for ordinary values ("25.0").
    Raises ValueError with Kafka's message otherwise (and for NaN or an infinity, which Kafka would store and no
    rate could be compared with); KeyError for a key that is no quota."""
    kind = QUOTA_KEYS[key]
    if kind is float:
        if not math.isfinite(value):
            raise ValueError(f"Configuration {key} must be a finite DOUBLE value")
        return repr(float(value))
    if not math.isfinite(value) or not -(2**63) <= value <= 2**63 - 1:
        raise ValueError(f"Configuration {key} must be a LONG value")
    whole = int(value + 1e-6)
    if abs(whole - value) > 1e-6:
        raise ValueError(f"Configuration {key} must be a LONG value")
    return str(whole)
