"""The pytest fixture names each endpoint as the ready file does: bootstrap servers, metrics, listeners."""

from __future__ import annotations

import urllib.request
from typing import Any

import pytest


@pytest.mark.odradek(brokers=2, metrics=True)
def test_the_fixture_exposes_each_endpoint_as_an_attribute(odradek_cluster: Any) -> None:
    endpoints = odradek_cluster.endpoints
    assert list(endpoints) == ["bootstrap.servers", "metrics"]
    assert endpoints["bootstrap.servers"] == odradek_cluster.bootstrap_servers
    assert len(odradek_cluster.bootstrap_servers.split(",")) == 2
    urls = odradek_cluster.metrics.split(",")
    assert len(urls) == 2
    with urllib.request.urlopen(urls[0], timeout=30) as response:
        assert b"kafka_controller_kafkacontroller_activecontrollercount" in response.read()
    assert odradek_cluster.listeners == {}


@pytest.mark.odradek(brokers=1, overrides={"listeners": "PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0",
                                            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT"})
def test_a_cluster_with_listeners_names_each_listeners_bootstrap(odradek_cluster: Any) -> None:
    assert odradek_cluster.metrics is None
    listeners = odradek_cluster.listeners
    assert list(listeners) == ["PLAINTEXT", "OTHER"]
    assert listeners["PLAINTEXT"] == odradek_cluster.bootstrap_servers != listeners["OTHER"]
