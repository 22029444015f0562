"""A schema registry speaking Confluent's REST API, kept in the compacted ``_schemas`` topic.

It is a Kafka client application, not a part of the broker: it reaches the cluster only through the Kafka protocol
(librdkafka), so ``odradek schema-registry --bootstrap-server`` runs it against any cluster, Apache Kafka included.
The pieces: the topic's key and value JSON (``records``), the state replayed from it (``state``), the three formats
(``avro_format``, ``json_format``, ``protobuf_format`` behind ``formats``), the pure decisions of each write
(``decisions``), the topic's reader and writer (``store``), the primary's election (``election``) and the HTTP API
(``http_api``), put together by ``service``.
"""
