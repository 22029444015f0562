"""Connection limits: Kafka's ``max.connections``, ``max.connections.per.ip`` (with ``.overrides``) and
``connections.max.idle.ms``.

A broker that accepts every connection can be run out of file descriptors and memory by one misbehaving client (a
connection leak in a loop is the usual one). Kafka's ConnectionQuotas counts connections per client address and per
listener at accept time, before any TLS or SASL work, and this module keeps the same books:

* per address: a new connection from an address that already has its maximum (``max.connections.per.ip``, or its
  entry in ``max.connections.per.ip.overrides``, ``host:count,...``, host names resolved once at start as Kafka
  does) is closed at once with one log line, Kafka's "Rejected connection from ..." (INFO);
* broker-wide and per listener (``max.connections``, ``listener.name.<l>.max.connections``): Kafka stops accepting
  until a connection closes, and lets the inter-broker listener exceed the broker-wide limit (closing the least
  recently used connection of another listener instead). asyncio's server cannot stop accepting for a while, so here
  the new connection is closed with one log line; the inter-broker listener is exempt from the broker-wide limit when
  there are several listeners, as in Kafka, but nothing else is closed for it;
* idle: a connection with no request read and no response written for ``connections.max.idle.ms`` (Kafka's default
  ten minutes; negative disables) is closed, as Kafka's Selector expires idle channels. A connection with a request
  still being handled is never idle.

The bookkeeping is plain data and decisions (:class:`ConnectionQuotas`, :func:`idle_expired`); the broker applies
them at accept time and on its tick.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

K = TypeVar("K")

_HOST = re.compile(r"[0-9a-zA-Z\-%._:]*")  # Kafka's Utils.validHostPattern
_CSV_SPLIT = re.compile(r"\s*,\s*")


def parse_per_ip_overrides(raw: str | None) -> dict[str, int]:
    """``max.connections.per.ip.overrides`` as Kafka reads it: ``host:count`` entries split on commas, each at its
    last colon (an IPv6 address keeps its own); ValueError names the property on a bad entry or address."""
    name = "max.connections.per.ip.overrides"
    if not raw:
        return {}
    out: dict[str, int] = {}
    for entry in _CSV_SPLIT.split(raw):
        host, colon, count = entry.rpartition(":")
        host = host.strip()
        if not colon:
            raise ValueError(f"Error parsing configuration property '{name}': {entry!r} is not host:count")
        try:
            out[host] = int(count.strip())
        except ValueError:
            raise ValueError(
                f"Error parsing configuration property '{name}': {count.strip()!r} is not a count") from None
    invalid = [h for h in out if not _HOST.fullmatch(h)]
    if invalid:
        raise ValueError(f"{name} contains invalid addresses : {','.join(invalid)}")
    return out


def normalize_address(host: str) -> str:
    """An address in one spelling (``::1`` and ``0:0::1`` are one address); a non-address is returned as it is."""
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).compressed
    except ValueError:
        return host


def resolve_host(host: str) -> str:
    """Kafka's InetAddress.getByName: an address stays itself, a name becomes its first address."""
    try:
        return ipaddress.ip_address(host).compressed
    except ValueError:
        pass
    infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    if not infos:
        raise ValueError(f"max.connections.per.ip.overrides: cannot resolve {host!r}")
    return normalize_address(str(infos[0][4][0]))


@dataclass(frozen=True)
class LimitSettings:
    max_connections: int = 2147483647
    max_per_ip: int = 2147483647
    per_ip: Mapping[str, int] = field(default_factory=dict)
    """Per-address maxima, keyed by the normalized address."""
    idle_ms: int = 600000
    per_listener: Mapping[str, int] = field(default_factory=dict)
    """``listener.name.<l>.max.connections``, by listener name in upper case."""

    @classmethod
    def from_values(cls, values: Mapping[str, Any], resolve: Callable[[str], str] = resolve_host) -> LimitSettings:
        """From the broker's config values; host names in the overrides are resolved here, once."""
        max_per_ip = int(values["max.connections.per.ip"])
        overrides = parse_per_ip_overrides(values.get("max.connections.per.ip.overrides"))
        if max_per_ip == 0 and not overrides:
            raise ValueError("max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides "
                             "property is set.")
        for name, value in (("max.connections", values["max.connections"]), ("max.connections.per.ip", max_per_ip)):
            if int(value) < 0:
                raise ValueError(f"Invalid value {value} for configuration {name}: Value must be at least 0")
        per_listener = {}
        for key, value in values.items():
            if key.startswith("listener.name.") and key.endswith(".max.connections"):
                listener = key[len("listener.name."):-len(".max.connections")]
                per_listener[listener.upper()] = int(value)
        return cls(
            max_connections=int(values["max.connections"]), max_per_ip=max_per_ip,
            per_ip={resolve(host): count for host, count in overrides.items()},
            idle_ms=int(values["connections.max.idle.ms"]), per_listener=per_listener,
        )


class ConnectionQuotas:
    """The counts of open connections by address, by listener and in all; what may be admitted."""

    def __init__(self, settings: LimitSettings, protected_listener: str | None = None, listeners: int = 1) -> None:
        """``protected_listener``: the inter-broker listener, exempt from the broker-wide limit when the broker has
        other listeners too (``listeners`` > 1; Kafka's protectedListener)."""
        self.settings = settings
        self.protected_listener = protected_listener.upper() if protected_listener else None
        self.listeners = listeners
        self.by_address: dict[str, int] = {}
        self.by_listener: dict[str, int] = {}
        self.total = 0

    def admit(self, listener: str, host: str) -> str | None:
        """Count a new connection and return None, or return why it is refused (the log line) and count nothing."""
        address = normalize_address(host)
        listener = listener.upper()
        limit = self.settings.per_listener.get(listener)
        if limit is not None and self.by_listener.get(listener, 0) >= limit:
            return (f"Rejected connection from {host} on listener {listener}: the listener already has its "
                    f"configured maximum of {limit} connections (listener.name.{listener.lower()}.max.connections)")
        protected = listener == self.protected_listener and self.listeners > 1
        if not protected and self.total >= self.settings.max_connections:
            return (f"Rejected connection from {host}: the broker already has its configured maximum of "
                    f"{self.settings.max_connections} connections (max.connections)")
        maximum = self.settings.per_ip.get(address, self.settings.max_per_ip)
        if self.by_address.get(address, 0) >= maximum:
            return (f"Rejected connection from {host}, address already has the configured maximum of {maximum} "
                    "connections.")
        self.by_address[address] = self.by_address.get(address, 0) + 1
        self.by_listener[listener] = self.by_listener.get(listener, 0) + 1
        self.total += 1
        return None

    def release(self, listener: str, host: str) -> None:
        """An admitted connection has closed."""
        address = normalize_address(host)
        listener = listener.upper()
        count = self.by_address.get(address, 0)
        if count <= 0:
            raise ValueError(f"connection count for {host} would go below zero")
        if count == 1:
            del self.by_address[address]
        else:
            self.by_address[address] = count - 1
        self.by_listener[listener] = max(self.by_listener.get(listener, 0) - 1, 0)
        self.total -= 1

    def count(self, host: str) -> int:
        return self.by_address.get(normalize_address(host), 0)


def idle_expired(activity: Iterable[tuple[K, int | None]], now_ms: int, idle_ms: int) -> list[K]:
    """The connections idle for longer than ``idle_ms``: each given with the time of its last read or write, or
    None while a request of it is being handled (never idle then). A negative ``idle_ms`` expires nothing."""
    if idle_ms < 0:
        return []
    return [key for key, last in activity if last is not None and now_ms - last > idle_ms]
