"""The row layout of Spark's built-in Kafka source, as a Spark DDL string and as the Arrow schema read() yields.

Spark checks yielded Arrow batches against the declared schema type by type (int -> int32,
timestamp -> timestamp[us, UTC]), so both spellings live side by side here and nowhere else.
"""

from __future__ import annotations

import pyarrow as pa

BASE_DDL = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int"
HEADERS_DDL = "headers array<struct<key: string, value: binary>>"

HEADER_STRUCT = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
HEADERS_TYPE = pa.list_(pa.field("element", HEADER_STRUCT))

_BASE_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
]


def source_ddl(include_headers: bool) -> str:
    """The Spark schema of a read, with the headers column only when includeHeaders is set (as Spark does)."""
    return f"{BASE_DDL}, {HEADERS_DDL}" if include_headers else BASE_DDL


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema every RecordBatch yielded by read() carries."""
    fields = list(_BASE_FIELDS)
    if include_headers:
        fields.append(pa.field("headers", HEADERS_TYPE))
    return pa.schema(fields)
