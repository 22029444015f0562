"""Kafka's listeners: ``listeners``, ``advertised.listeners``, ``listener.security.protocol.map`` and the
inter-broker listener, read and checked as Kafka's KafkaConfig reads and checks them.

A listener is a *name* (``PLAINTEXT``, ``SASL_PLAINTEXT``, ``INTERNAL``, ...) bound to a host and port and mapped to
a security protocol. Clients see the advertised endpoints of the listener they connected through; brokers talk to
each other through the inter-broker listener (``inter.broker.listener.name``, else the listener named after
``security.inter.broker.protocol``). Without ``listeners`` the broker has one PLAINTEXT listener on ``--host`` and
``--port``, which is what odradek always had. Per-listener settings live under ``listener.name.<name lower-case>.``
and win over the broker-wide setting, as in Kafka.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})


@dataclass(frozen=True, slots=True)
class Listener:
    """One listener: its name, where it binds (or what it advertises) and its security protocol."""

    name: str
    host: str
    port: int
    protocol: str

    @property
    def sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS

    @property
    def tls(self) -> bool:
        return self.protocol in TLS_PROTOCOLS

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class ListenerConfig:
    listeners: tuple[Listener, ...]
    """What the broker binds, in the order configured (the first one names the ready line)."""
    advertised: tuple[Listener, ...]
    """What the broker registers and clients see; a port of 0 means "the port the listener got"."""
    protocol_map: Mapping[str, str]
    inter_broker: str
    """The listener name brokers (and the controller) use to reach this broker and each other."""

    def advertised_for(self, name: str) -> Listener | None:
        return next((listener for listener in self.advertised if listener.name == name), None)


def parse_protocol_map(text: str) -> dict[str, str]:
    """``NAME:PROTOCOL,...``; Kafka refuses an unknown protocol and a name mapped twice."""
    mapping: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, colon, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not colon or not name or not protocol:
            raise ValueError(f"listener.security.protocol.map: {item!r} is not LISTENER_NAME:SECURITY_PROTOCOL")
        if protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"listener.security.protocol.map: no enum constant for security protocol {protocol!r}")
        if name in mapping:
            raise ValueError(f"listener.security.protocol.map: listener {name} is mapped twice")
        mapping[name] = protocol
    return mapping


def parse_listeners(text: str, protocol_map: Mapping[str, str], setting: str) -> tuple[Listener, ...]:
    """``NAME://host:port,...`` (IPv6 hosts in brackets; an empty host binds every interface)."""
    found: list[Listener] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, rest = item.partition("://")
        host, colon, port = rest.rpartition(":")
        if not sep or not colon or not name or not port.isdigit():
            raise ValueError(f"{setting}: unable to parse {item!r} to a broker endpoint")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        name = name.upper()
        protocol = protocol_map.get(name)
        if protocol is None:
            raise ValueError(f"{setting}: no security protocol defined for listener {name} "
                             "(add it to listener.security.protocol.map)")
        number = int(port)
        if number > 65535:
            raise ValueError(f"{setting}: port {number} of {name} is out of range")
        found.append(Listener(name, host, number, protocol))
    names = [listener.name for listener in found]
    if len(set(names)) != len(names):
        raise ValueError(f"{setting}: each listener must have a different name, listeners: {text}")
    ports = [listener.port for listener in found if listener.port != 0]
    if len(set(ports)) != len(ports):
        raise ValueError(f"{setting}: each listener must have a different port, listeners: {text}")
    return tuple(found)


def listener_config(values: Mapping[str, Any], host: str, port: int) -> ListenerConfig:
    """The broker's listeners from its settings; ``host``/``port`` make the one PLAINTEXT listener when
    ``listeners`` is unset."""
    protocol_map = parse_protocol_map(str(values.get("listener.security.protocol.map") or ""))
    raw = values.get("listeners")
    if raw:
        listeners = parse_listeners(str(raw), protocol_map, "listeners")
        if not listeners:
            raise ValueError("listeners: no listener given")
    else:
        if "PLAINTEXT" not in protocol_map:
            raise ValueError("listener.security.protocol.map must map PLAINTEXT when listeners is not set")
        listeners = (Listener("PLAINTEXT", host, port, protocol_map["PLAINTEXT"]),)
    raw_advertised = values.get("advertised.listeners")
    advertised = (parse_listeners(str(raw_advertised), protocol_map, "advertised.listeners") if raw_advertised
                  else listeners)
    bound = {listener.name for listener in listeners}
    for listener in advertised:
        if listener.name not in bound:
            raise ValueError(f"advertised.listeners listener names must be equal to or a subset of the ones defined "
                             f"in listeners. Found {listener.name}. The valid options based on the current "
                             f"configuration are {','.join(sorted(bound))}")
        if listener.host == "0.0.0.0" and (raw or raw_advertised):
            raise ValueError(f"advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. Use a routable "
                             f"IP address ({listener})")
    explicit_name = values.get("inter.broker.listener.name")
    if explicit_name:
        inter_broker = str(explicit_name).upper()
    else:
        inter_broker = str(values.get("security.inter.broker.protocol") or "PLAINTEXT").upper()
        if inter_broker not in SECURITY_PROTOCOLS:
            raise ValueError(f"security.inter.broker.protocol: unknown security protocol {inter_broker}")
    if explicit_name and values.get("security.inter.broker.protocol") not in (None, "PLAINTEXT") :
        raise ValueError("Only one of inter.broker.listener.name and security.inter.broker.protocol should be set.")
    names = [listener.name for listener in advertised]
    if inter_broker not in names:
        raise ValueError(f"inter.broker.listener.name must be a listener name defined in advertised.listeners. The "
                         f"valid options based on currently configured listeners are {','.join(names)}")
    return ListenerConfig(listeners, advertised, protocol_map, inter_broker)


def advertised_host(listener: Listener) -> str:
    """An empty bind host (every interface) advertises this machine's name, as Kafka advertises its canonical
    host name."""
    return listener.host or socket.getfqdn()


def listener_setting(values: Mapping[str, Any], listener: str, name: str) -> Any:
    """``listener.name.<listener>.<name>`` when set, else the broker-wide ``name`` (Kafka's listener prefix)."""
    prefixed = values.get(f"listener.name.{listener.lower()}.{name}")
    return prefixed if prefixed is not None else values.get(name)


def rebind(text: str, port_for: Callable[[str, int], int]) -> str:
    """``listeners`` text with each listener's port replaced by ``port_for(name, port)`` (several brokers of one
    process get distinct ports; a restarted broker binds its old ones)."""
    out = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, _sep, rest = item.partition("://")
        host, _colon, port = rest.rpartition(":")
        out.append(f"{name}://{host}:{port_for(name.upper(), int(port) if port.isdigit() else 0)}")
    return ",".join(out)
