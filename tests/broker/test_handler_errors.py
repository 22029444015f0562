"""A handler that fails is our bug, not the client's: it is logged as an internal error and answered with
UNKNOWN_SERVER_ERROR where the response has a top-level error code. Only a request kio decoded with a null its schema
forbids is malformed (the connection closes). The broker runs in-process with one API's handler replaced."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import io
import logging
import types
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from odradek.broker.config import BrokerConfig
from odradek.broker.connection import Connection
from odradek.broker.server import Broker
from odradek.coordination import EmbeddedBackend
from odradek.coordination.store import ConnectionLossError
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.framing import FrameError

DESCRIBE_CLUSTER, METADATA, INIT_PRODUCER_ID = 60, 3, 22

pytestmark = pytest.mark.asyncio(loop_scope="module")


class _NullWriter:
    def get_extra_info(self, name: str) -> tuple[str, int]:
        return ("127.0.0.1", 1)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def broker(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Broker]:
    """One broker for the module, on the module's loop (the tests' too: ``pytestmark``)."""
    config = BrokerConfig.build(data_dir=str(Path(tmp_path_factory.mktemp("handler-errors"))))
    broker = Broker(config, EmbeddedBackend())
    await broker.start()
    yield broker
    await broker.stop()


def _connection(broker: Broker, key: int, handle: Any) -> Connection:
    """A connection whose API ``key`` is served by ``handle`` (the rest of the module as it is)."""
    real = broker.services.apis[key]
    fake = types.SimpleNamespace(API_KEY=key, MIN_VERSION=real.MIN_VERSION, MAX_VERSION=real.MAX_VERSION,
                                 handle=handle, __name__=real.__name__)
    services = dataclasses.replace(broker.services, apis={**broker.services.apis, key: fake})
    return Connection(services, broker, asyncio.StreamReader(), _NullWriter())  # type: ignore[arg-type]


def _frame(key: int, version: int, body: Any) -> bytes:
    header_cls = load_request_schema(key, version).__header_schema__
    buf = io.BytesIO()
    fields = {"request_api_key": key, "request_api_version": version, "correlation_id": 7, "client_id": "t"}
    entity_writer(header_cls)(buf, header_cls(**{k: v for k, v in fields.items()
                                                  if k in header_cls.__dataclass_fields__}))
    entity_writer(type(body))(buf, body)
    return buf.getvalue()


def _decoded(chunks: Any, key: int, version: int) -> tuple[Any, Any]:
    """The response header and body a dispatch framed."""
    assert chunks is not None
    frame = b"".join(bytes(c) for c in chunks)[4:]
    response_cls = load_response_schema(key, version)
    header, offset = entity_reader(response_cls.__header_schema__)(frame, 0)
    response, _ = entity_reader(response_cls)(frame, offset)
    return header, response


async def _bug(ctx: Any, request: Any) -> Any:
    raise AttributeError("'NoneType' object has no attribute 'brokers'")


async def test_a_failing_handler_answers_unknown_server_error_and_logs_an_internal_error(
    broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    b = broker
    conn = _connection(b, DESCRIBE_CLUSTER, _bug)
    request = load_request_schema(DESCRIBE_CLUSTER, 0)(include_cluster_authorized_operations=False)
    with caplog.at_level(logging.ERROR, logger="odradek.broker.connection"):
        chunks = await conn.dispatch(_frame(DESCRIBE_CLUSTER, 0, request))
    header, response = _decoded(chunks, DESCRIBE_CLUSTER, 0)
    assert header.correlation_id == 7
    assert response.error_code == ErrorCode.unknown_server_error
    assert any("internal error handling describe_cluster" in r.getMessage() for r in caplog.records)
    assert not any("malformed" in r.getMessage() for r in caplog.records)


async def test_a_failing_handler_without_an_error_code_closes_the_connection(
    broker: Broker
) -> None:
    b = broker
    conn = _connection(b, METADATA, _bug)
    request = load_request_schema(METADATA, 1)(topics=None)
    with pytest.raises(FrameError, match="internal error handling metadata"):
        await conn.dispatch(_frame(METADATA, 1, request))


async def test_a_null_the_schema_forbids_is_a_malformed_request(broker: Broker) -> None:
    b = broker

    async def iterate(ctx: Any, request: Any) -> Any:
        return [t for t in request.topic_names]  # what a real handler does with the array

    conn = _connection(b, 20, iterate)  # DeleteTopics v1: topic_names is an array that may not be null
    schema = load_request_schema(20, 1)
    request = schema(topic_names=None, timeout=datetime.timedelta(seconds=1))  # type: ignore[arg-type]
    with pytest.raises(FrameError, match="malformed: topic_names is null"):
        await conn.dispatch(_frame(20, 1, request))


async def _refusal(ctx: Any, request: Any) -> Any:
    raise KafkaError(ErrorCode.cluster_authorization_failed, "not for you")


async def test_a_kafka_error_raised_out_of_a_handler_is_the_response_error(
    broker: Broker
) -> None:
    b = broker
    conn = _connection(b, DESCRIBE_CLUSTER, _refusal)
    request = load_request_schema(DESCRIBE_CLUSTER, 0)(include_cluster_authorized_operations=False)
    chunks = await conn.dispatch(_frame(DESCRIBE_CLUSTER, 0, request))
    header, response = _decoded(chunks, DESCRIBE_CLUSTER, 0)
    assert (header.correlation_id, response.error_code, response.error_message) == (
        7, ErrorCode.cluster_authorization_failed, "not for you")


async def test_a_kafka_error_without_a_response_error_code_closes_the_connection(
    broker: Broker
) -> None:
    b = broker
    conn = _connection(b, METADATA, _refusal)
    request = load_request_schema(METADATA, 1)(topics=None)
    with pytest.raises(FrameError, match="metadata v1 failed with cluster_authorization_failed"):
        await conn.dispatch(_frame(METADATA, 1, request))


async def _store_gone(ctx: Any, request: Any) -> Any:
    raise ConnectionLossError("connection to the coordination store lost")


async def test_a_lost_coordination_store_is_a_retriable_error_not_a_closed_connection(
    broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    b = broker
    conn = _connection(b, INIT_PRODUCER_ID, _store_gone)
    request = load_request_schema(INIT_PRODUCER_ID, 4)(
        transactional_id=None, transaction_timeout=datetime.timedelta(seconds=60), producer_id=-1, producer_epoch=-1)
    with caplog.at_level(logging.WARNING, logger="odradek.broker.connection"):
        chunks = await conn.dispatch(_frame(INIT_PRODUCER_ID, 4, request))
    _header, response = _decoded(chunks, INIT_PRODUCER_ID, 4)
    assert response.error_code == ErrorCode.coordinator_not_available
    assert any("coordination store unavailable" in r.getMessage() for r in caplog.records)
    assert not any(r.exc_info for r in caplog.records)  # one line, no traceback
