"""Fuzz the request path: random frames, mutated valid frames, and schema-valid random requests for every API.

The property: for any bytes, ``Connection.dispatch`` either answers or raises FrameError (one log line, that
connection closed). Anything else would escape to the connection handler's catch-all, which is a bug. A broker
runs in-process so every handler sees the fuzzed requests; afterwards it must still serve a normal request.
"""

from __future__ import annotations

import asyncio
import io
import struct
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.serial import entity_writer
from kio.static.primitive import Records

from odradek.broker.config import BrokerConfig
from odradek.broker.connection import Connection
from odradek.broker.server import Broker
from odradek.coordination import EmbeddedBackend
from odradek.protocol.framing import FrameError
from odradek.protocol.records import encode_batch
from odradek.security.acl import Operation, PatternType, Permission, ResourceType, from_code

_batches = st.builds(
    lambda n, v: bytes(encode_batch([(None, v, [])] * n, timestamp_ms=0)),
    st.integers(1, 3),
    st.binary(max_size=64),
)
st.register_type_strategy(Records, st.one_of(st.binary(max_size=128), _batches))

pytestmark = pytest.mark.asyncio(loop_scope="module")


class _NullWriter:
    def get_extra_info(self, name: str) -> tuple[str, int]:
        return ("127.0.0.1", 1)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def conn(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Connection]:
    """A connection to an in-process broker, on the module's loop (the tests' too: ``pytestmark``)."""
    data = Path(tmp_path_factory.mktemp("fuzz"))
    config = BrokerConfig.build(data_dir=str(data), overrides={"group.initial.rebalance.delay.ms": "0"})
    broker = Broker(config, EmbeddedBackend())
    await broker.start()
    yield Connection(broker.services, broker, asyncio.StreamReader(), _NullWriter())  # type: ignore[arg-type]
    await broker.stop()


async def _dispatch(conn: Connection, frame: bytes) -> None:
    try:
        await asyncio.wait_for(conn.dispatch(frame), 10)
    except FrameError:
        pass


def _encode(api_key: int, version: int, body: object) -> bytes:
    schema = load_request_schema(api_key, version)
    header_cls = schema.__header_schema__
    buf = io.BytesIO()
    fields = {"request_api_key": api_key, "request_api_version": version, "correlation_id": 1}
    if "client_id" in header_cls.__dataclass_fields__:
        fields["client_id"] = "fuzz"
    entity_writer(header_cls)(buf, header_cls(**fields))
    entity_writer(schema)(buf, body)
    return buf.getvalue()


FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


def _kio_apis(conn: Connection) -> list[tuple[int, object]]:
    """APIs with kio schemas; the controller's own four (RAW) are fuzzed by the raw-frame tests below."""
    return sorted((k, m) for k, m in conn.services.apis.items() if not getattr(m, "RAW", False))


@FUZZ
@given(st.integers(4, 7), st.binary(max_size=256))
async def test_controller_api_frames(
    conn: Connection, api_key: int, tail: bytes
) -> None:
    await _dispatch(conn, struct.pack(">hhi", api_key, 0, 1) + tail)




@FUZZ
@given(st.binary(max_size=512))
async def test_random_frames(conn: Connection, frame: bytes) -> None:
    await _dispatch(conn, frame)


@FUZZ
@given(st.data())
async def test_mutated_valid_frames(conn: Connection, data: st.DataObject) -> None:
    api_key, module = data.draw(st.sampled_from(_kio_apis(conn)))
    version = data.draw(st.integers(module.MIN_VERSION, module.MAX_VERSION))
    schema = load_request_schema(api_key, version)
    body = data.draw(st.from_type(schema))
    frame = bytearray(_encode(api_key, version, body))
    for _ in range(data.draw(st.integers(0, 4))):
        pos = data.draw(st.integers(0, len(frame) - 1))
        frame[pos] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        frame = frame[: data.draw(st.integers(0, len(frame)))]
    await _dispatch(conn, bytes(frame))


ACL_APIS = (29, 30, 31)  # DescribeAcls, CreateAcls, DeleteAcls
_ACL_CODE_FIELDS = {"resource_type": ResourceType, "resource_type_filter": ResourceType,
                    "resource_pattern_type": PatternType, "pattern_type_filter": PatternType,
                    "operation": Operation, "permission_type": Permission}


def _names_unknown(body: object) -> bool:
    """Whether an ACL request names an UNKNOWN (or unheard-of) resource type, pattern type, operation or
    permission, in itself (DescribeAcls) or in its creations or filters: Kafka reads any such code as UNKNOWN."""
    items = [body, *getattr(body, "creations", ()), *getattr(body, "filters", ())]
    return any(int(from_code(cls, getattr(item, name))) == 0
               for item in items for name, cls in _ACL_CODE_FIELDS.items() if hasattr(item, name))


@FUZZ
@given(st.data())
async def test_schema_valid_random_requests(
    conn: Connection, data: st.DataObject
) -> None:
    """Well-formed but arbitrary requests reach the handlers themselves: they must answer, not crash."""
    api_key, module = data.draw(st.sampled_from(_kio_apis(conn)))
    version = data.draw(st.integers(module.MIN_VERSION, module.MAX_VERSION))
    body = data.draw(st.from_type(load_request_schema(api_key, version)))
    frame = _encode(api_key, version, body)
    if api_key in ACL_APIS and _names_unknown(body):
        # Kafka refuses to parse an ACL request naming an UNKNOWN resource type, pattern type, operation or
        # permission (IllegalArgumentException while building the request): the connection closes.
        with pytest.raises(FrameError, match="UNKNOWN"):
            await asyncio.wait_for(conn.dispatch(frame), 10)
        return
    # well-formed requests must be answered: FrameError here would be a handler bug, so it is not caught
    result = await asyncio.wait_for(conn.dispatch(frame), 10)
    if result is not None:
        (size,) = struct.unpack(">i", bytes(result[0][:4]))
        assert size == sum(len(c) for c in result) - 4


async def test_broker_still_serves_after_fuzzing(conn: Connection) -> None:
    schema = load_request_schema(18, 3)
    body = schema(client_software_name="t", client_software_version="1")
    result = await conn.dispatch(_encode(18, 3, body))
    assert result is not None and len(b"".join(bytes(c) for c in result)) > 20
