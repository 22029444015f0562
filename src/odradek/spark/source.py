"""The ``odradek`` data source: Spark asks it for a schema, readers and writers."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from odradek.spark.options import parse_sink_options, parse_source_options
from odradek.spark.reader import OdradekBatchReader, OdradekStreamReader
from odradek.spark.schema import source_ddl
from odradek.spark.writer import OdradekBatchWriter, OdradekStreamWriter, validate_sink_schema


class OdradekDataSource(DataSource):
    """Spark's Kafka source and sink, option for option, for any Kafka-compatible cluster."""

    @classmethod
    def name(cls) -> str:
        return "odradek"

    def schema(self) -> str:
        include = str(self.options.get("includeHeaders", "false")).strip().lower() == "true"
        return source_ddl(include)

    def reader(self, schema: StructType) -> OdradekBatchReader:
        return OdradekBatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> OdradekStreamReader:
        return OdradekStreamReader(parse_source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> OdradekBatchWriter:
        opts = parse_sink_options(self.options)
        validate_sink_schema(schema, opts)
        return OdradekBatchWriter(opts)

    def streamWriter(self, schema: StructType, overwrite: bool) -> OdradekStreamWriter:
        opts = parse_sink_options(self.options)
        validate_sink_schema(schema, opts)
        return OdradekStreamWriter(opts)
