"""The Java producer on odradek: every codec with acks 0, 1 and all, and an explicitly idempotent producer; each
topic read back by the Java consumer, the codec checked in the stored batches, and all of it compared with the
same program against Apache Kafka 3.9."""

from __future__ import annotations

import pytest

from java_clients.conftest import CLIENTS, ProgramRuns
from java_clients.programs import batch_codecs, by_check, differences, first_segment
from odradek.apache_kafka import KafkaCluster
from odradek.testing import ThreadedCluster

RECORDS = 20


@pytest.mark.parametrize("client", CLIENTS)
def test_every_codec_and_acks_setting(runs: ProgramRuns, odradek_java: ThreadedCluster, client: str) -> None:
    _prefix, lines = runs.run(client, odradek_java.bootstrap_servers, "ProducerCheck")
    sends = by_check(lines, "send")
    assert {(s["codec"], s["acks"]) for s in sends if not s["idempotent"]} == {
        (c, a) for c in ("none", "gzip", "snappy", "lz4", "zstd") for a in ("0", "1", "all")
    }
    reads = {r["topic"]: r["records"] for r in by_check(lines, "read")}
    for s in sends:
        assert s["error"] is None, s
        # acks=0 gets no offsets back; the others get every offset, in order
        assert s["offsets"] == ([-1] * RECORDS if s["acks"] == "0" else list(range(RECORDS))), s
        assert reads[s["topic"]] == [[i, f"k{i}", f"{s['codec']}-{s['acks']}-{i}"] for i in range(RECORDS)], s
        codecs = batch_codecs(first_segment(odradek_java.cluster.data_dir, s["topic"]))
        assert codecs and set(codecs) == {s["codec"]}, (s["topic"], codecs)


@pytest.mark.parametrize("client", CLIENTS)
def test_same_as_apache_kafka(
    runs: ProgramRuns, odradek_java: ThreadedCluster, apache_kafka_39: KafkaCluster, client: str
) -> None:
    ours, theirs = runs.compared(
        client, odradek_java.bootstrap_servers, apache_kafka_39.bootstrap_servers, "ProducerCheck"
    )
    assert differences(ours, theirs) == []
    ours_prefix, _ = runs.run(client, odradek_java.bootstrap_servers, "ProducerCheck")
    theirs_prefix, _ = runs.run(client, apache_kafka_39.bootstrap_servers, "ProducerCheck")
    for s in by_check(theirs, "send"):
        # how many batches the records made depends on the sender thread's timing; the codec does not
        kafka = batch_codecs(first_segment(apache_kafka_39.brokers[0].log_dir, s["topic"].replace("P", theirs_prefix)))
        ours_codecs = batch_codecs(first_segment(odradek_java.cluster.data_dir, s["topic"].replace("P", ours_prefix)))
        assert set(ours_codecs) == set(kafka), s["topic"]
