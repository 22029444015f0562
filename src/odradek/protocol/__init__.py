"""The Kafka wire protocol: framing, API versions, request decoding, hot-path encoders, RecordBatch checks."""
