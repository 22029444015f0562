"""Schema-valid random requests to the SASL and SCRAM-credential APIs, in-process, on a SASL listener's connection.

The property, as for every API (tests/broker/test_fuzz.py): ``Connection.dispatch`` answers or raises FrameError;
nothing escapes to the connection's catch-all. Each example is a fresh connection driven through a few requests, so
handshakes, tokens and credential changes meet each other in random orders. Deterministic (derandomized).
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.serial import entity_writer
from security_helpers import PLAIN_JAAS

from odradek.broker.config import BrokerConfig
from odradek.broker.connection import Connection
from odradek.broker.server import Broker
from odradek.coordination import EmbeddedBackend
from odradek.protocol.framing import FrameError

KEYS = {17: (0, 1), 36: (0, 2), 50: (0, 0), 51: (0, 0)}
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)

pytestmark = pytest.mark.asyncio(loop_scope="module")


class _NullWriter:
    def get_extra_info(self, name: str) -> tuple[str, int]:
        return ("127.0.0.1", 1)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def broker(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Broker]:
    """An in-process broker with a SASL listener, on the module's loop (the tests' too: ``pytestmark``)."""
    config = BrokerConfig.build(data_dir=str(Path(tmp_path_factory.mktemp("sasl-fuzz"))), overrides={
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    })
    broker = Broker(config, EmbeddedBackend())
    await broker.start()
    yield broker
    await broker.stop()


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


_MECHANISMS = st.sampled_from(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", ""])


@FUZZ
@given(st.data())
async def test_random_sasl_and_credential_requests(broker: Broker, data: st.DataObject) -> None:
    sasl_listener = data.draw(st.booleans())
    name = "SASL_PLAINTEXT" if sasl_listener else "PLAINTEXT"
    conn = Connection(broker.services, broker, asyncio.StreamReader(), _NullWriter(),  # type: ignore[arg-type]
                      name, broker.sasl.get(name))
    for _ in range(data.draw(st.integers(1, 4))):
        key = data.draw(st.sampled_from(sorted(KEYS)))
        version = data.draw(st.integers(*KEYS[key]))
        schema = load_request_schema(key, version)
        body = schema(mechanism=data.draw(_MECHANISMS)) if key == 17 else data.draw(st.from_type(schema))
        try:
            await asyncio.wait_for(conn.dispatch(_encode(key, version, body)), 10)
        except FrameError:
            pass
    # the broker still answers a normal request on a fresh plaintext connection
    plain = Connection(broker.services, broker, asyncio.StreamReader(), _NullWriter())  # type: ignore[arg-type]
    schema = load_request_schema(18, 3)
    out = await plain.dispatch(_encode(18, 3, schema(client_software_name="x",
                                                                        client_software_version="1")))
    assert out
