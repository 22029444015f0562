"""Kafka Streams 4.x with exactly_once_v2 on a three-broker odradek cluster, two instances in separate JVMs.

The word count (``java/WordCountApp.java``) keeps a key-value store and a window store, both with changelogs, behind
a repartition topic. Input arrives in three parts: once the second is produced, the leader of the repartition topic's
first partition is killed; once the third is produced, the first instance whose transaction holds records of it is
killed with SIGKILL. Read under read_committed, the last count per word and per window must then be the expected
one, each key's counts strictly increasing (nothing counted twice, no committed update repeated), and Streams must
have purged the repartition topic it consumed (DeleteRecords). Then ``kafka-streams-application-reset`` resets the
application (input offsets to the beginning, internal topics deleted) and a rerun counts the same again. The
internal topics must carry the configs Streams asks for, read back through DescribeConfigs.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient, ConfigResource
from streams_app import (
    APP,
    COUNTS_CHANGELOG,
    INPUT,
    OUTPUT,
    PARTITIONS,
    REPARTITION,
    WINDOW_MS,
    WINDOWED_CHANGELOG,
    CommittedOutput,
    Instance,
    committed,
    create_topics,
    ends,
    expected_counts,
    input_lines,
    leader,
    produce,
    starts,
)

from brokers import wait_for
from kafka_clients import opened
from odradek.apache_kafka import KAFKA_4, java_command
from odradek.testing import ThreadedCluster

LINES_PER_PART = 120
SETTINGS = ("repartition.purge.interval.ms=1000", "commit.interval.ms=1000", "print-acks")
"""Consumed repartition records deleted (DeleteRecords) every second, not every 30 s; transactions committed every
second, not every 100 ms, so that an instance killed as soon as the broker acknowledges its records is killed inside
the transaction holding them; each acknowledged record printed, so the test sees which instance wrote what."""
RUN_TIMEOUT_S = 120.0


def _topic_configs(admin: AdminClient, topic: str) -> dict[str, str]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(30)
    return {name: entry.value for name, entry in entries.items()}


def _reset(bootstrap: str, lib: Path) -> str:
    """``kafka-streams-application-reset`` (its script runs ``org.apache.kafka.tools.StreamsResetter``)."""
    command = java_command(KAFKA_4, "org.apache.kafka.tools.StreamsResetter", "--bootstrap-server", bootstrap,
                           "--application-id", APP, "--input-topics", INPUT, lib=lib)
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, f"StreamsResetter exited {result.returncode}:\n{result.stdout}{result.stderr}"
    return result.stdout


def test_exactly_once_word_count_across_broker_and_instance_kills_then_reset(
    streams_cluster: ThreadedCluster, streams_classes: Path, streams_lib: Path, tmp_path: Path
) -> None:
    cluster = streams_cluster
    bootstrap = cluster.bootstrap_servers
    admin = opened(AdminClient({"bootstrap.servers": bootstrap}))
    create_topics(admin)

    base_ms = (int(time.time() * 1000) // WINDOW_MS - 10) * WINDOW_MS
    parts = [input_lines(seed, LINES_PER_PART, base_ms) for seed in (1, 2, 3)]
    totals, windowed = expected_counts(line for part in parts for line in part)

    def instance(name: str, state: str, *settings: str) -> Instance:
        return Instance(name, state, bootstrap, streams_classes, streams_lib, tmp_path, *settings)

    def input_committed(upto: dict[int, int]) -> None:
        wait_for(lambda: committed(bootstrap, INPUT) == upto, RUN_TIMEOUT_S, interval=0.5,
                 what=f"the application to commit the input up to {upto}")

    produce(bootstrap, INPUT, parts[0])
    first, second = instance("a", "a", *SETTINGS), instance("b", "b", *SETTINGS)
    try:
        first.wait_running(RUN_TIMEOUT_S)
        second.wait_running(RUN_TIMEOUT_S)
        input_committed(ends(bootstrap, INPUT))

        # the internal topics as Streams asked for them (replication.factor; RepartitionTopicConfig, the changelog
        # configs)
        internal = {REPARTITION, COUNTS_CHANGELOG, WINDOWED_CHANGELOG}
        described = admin.list_topics(timeout=30).topics
        replicas = {len(p.replicas) for t in internal for p in described[t].partitions.values()}
        assert replicas == {3} and all(len(described[t].partitions) == PARTITIONS for t in internal)
        repartition = _topic_configs(admin, REPARTITION)
        assert (repartition["cleanup.policy"], repartition["segment.bytes"], repartition["retention.ms"],
                repartition["message.timestamp.type"]) == ("delete", "52428800", "-1", "CreateTime")
        counts = _topic_configs(admin, COUNTS_CHANGELOG)
        assert (counts["cleanup.policy"], counts["message.timestamp.type"]) == ("compact", "CreateTime")
        windows = _topic_configs(admin, WINDOWED_CHANGELOG)
        # the window store keeps size + grace (1 min + 1 day); its changelog one more day
        # (windowstore.changelog.additional.retention.ms)
        assert (windows["cleanup.policy"], windows["retention.ms"]) == ("compact,delete", str(60_000 + 2 * 86_400_000))

        produce(bootstrap, INPUT, parts[1])
        upto = ends(bootstrap, INPUT)
        victim = leader(admin, REPARTITION, 0)
        cluster.kill(victim)  # mid-processing
        input_committed(upto)

        # the first instance whose records of the third part are in the repartition topic (only the first
        # sub-topology writes there, reading the input) is killed inside the transaction holding them (most likely:
        # it commits every second), which the coordinator aborts once it times out; the other takes its tasks over
        before = {i: i.acknowledged(REPARTITION) for i in (first, second)}
        produce(bootstrap, INPUT, parts[2])
        upto = ends(bootstrap, INPUT)
        writers = wait_for(lambda: [i for i in (first, second) if i.acknowledged(REPARTITION) > before[i]],
                           RUN_TIMEOUT_S, interval=0.01, what="an instance to write the third part's words")
        killed, survivor = (first, second) if first in writers else (second, first)
        killed.kill()
        input_committed(upto)
        CommittedOutput(bootstrap, OUTPUT, PARTITIONS).wait_for_exactly(totals, RUN_TIMEOUT_S)
        CommittedOutput(bootstrap, f"{OUTPUT}-windowed", PARTITIONS).wait_for_exactly(windowed, RUN_TIMEOUT_S)
        wait_for(lambda: all(start > 0 for start in starts(bootstrap, REPARTITION, PARTITIONS).values()),
                 RUN_TIMEOUT_S, interval=0.5, what="Streams to purge the repartition topic (DeleteRecords)")

        cluster.start_broker(victim)  # the rerun creates its internal topics with replication factor 3 again
        wait_for(lambda: len(admin.list_topics(timeout=30).brokers) == 3, 60, interval=0.5,
                 what=f"broker {victim} back in the metadata")
        survivor.stop()
    finally:
        for running in (first, second):
            if running.proc.poll() is None:
                running.kill()

    output_ends = ends(bootstrap, OUTPUT, PARTITIONS)
    windowed_ends = ends(bootstrap, f"{OUTPUT}-windowed", PARTITIONS)
    # Streams closes without leaving the group (its consumers do not send LeaveGroup): the reset tool refuses an
    # active group, so wait, as a user would, for the member's session to expire
    wait_for(lambda: not admin.describe_consumer_groups([APP])[APP].result(30).members, 60, interval=0.5,
             what="the closed instance to leave the group")
    printed = _reset(bootstrap, streams_lib)
    assert "Done." in printed, printed
    wait_for(lambda: not internal & set(admin.list_topics(timeout=30).topics), 60, interval=0.5,
             what="the reset to delete the internal topics")
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(APP)])[APP].result(30)
    assert {(tp.topic, tp.offset) for tp in offsets.topic_partitions} == {(INPUT, 0)}

    rerun = instance("a-rerun", "a", "cleanup")
    try:
        rerun.wait_running(RUN_TIMEOUT_S)
        CommittedOutput(bootstrap, OUTPUT, PARTITIONS, output_ends).wait_for_exactly(totals, RUN_TIMEOUT_S)
        CommittedOutput(bootstrap, f"{OUTPUT}-windowed", PARTITIONS, windowed_ends).wait_for_exactly(
            windowed, RUN_TIMEOUT_S)
        rerun.stop()
    finally:
        if rerun.proc.poll() is None:
            rerun.kill()
    assert not (first.exceptions + second.exceptions + rerun.exceptions), "uncaught exceptions in the application"
