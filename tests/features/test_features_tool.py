"""``odradek features`` beside Kafka 4.4's own ``kafka-features.sh`` (FeatureCommand): both run against one odradek
broker print the same, and Kafka's tool prints the same for odradek's group.version as for a Kafka 4.4 broker's."""

from __future__ import annotations

import re
from collections.abc import Callable

from click.testing import CliRunner

from brokers import BrokerProcess, wait_for
from odradek.apache_kafka import KAFKA_4, KafkaCluster, run_tool
from odradek.cli.main import main

FEATURE_COMMAND = "org.apache.kafka.tools.FeatureCommand"


def kafka_tool(bootstrap: str, *args: str) -> tuple[int, str, str]:
    done = run_tool(KAFKA_4, FEATURE_COMMAND, "--bootstrap-server", bootstrap, *args)
    return done.returncode, done.stdout, done.stderr


def ours(bootstrap: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["features", "--bootstrap-server", bootstrap, *args])
    return result.exit_code, result.stdout, result.stderr


def both(bootstrap: str, *args: str) -> tuple[int, str, str]:
    """The two tools' exit status and output, which must agree; stderr compared by its last line (Kafka's tool
    prints the failure's message there, odradek's prefixes ``Error: ``)."""
    theirs, mine = kafka_tool(bootstrap, *args), ours(bootstrap, *args)
    assert (mine[0], mine[1]) == (theirs[0], theirs[1]), (args, theirs, mine)
    def last(text: str) -> str:
        return text.strip().splitlines()[-1].removeprefix("Error: ") if text else ""

    assert last(mine[2]) == last(theirs[2]), (args, theirs, mine)
    return mine


def test_features_tool_matches_kafkas(broker_factory: Callable[..., BrokerProcess],
                                      apache_kafka_4: KafkaCluster) -> None:
    bootstrap = broker_factory().bootstrap
    line = (f"Feature: {'group.version':<40}  SupportedMinVersion: {0:<15}  SupportedMaxVersion: {1:<15}  "
            "FinalizedVersionLevel: {:<15}  Epoch: {}\n")
    wait_for(lambda: ours(bootstrap, "describe")[1] == line.format(1, 0), what="/feature read")
    assert both(bootstrap, "describe") == (0, line.format(1, 0), "")
    # Kafka 4.4 prints the same group.version line for itself (its epoch is its metadata offset)
    kafka_lines = kafka_tool(apache_kafka_4.bootstrap_servers, "describe")[1].splitlines(keepends=True)
    group_line = next(x for x in kafka_lines if x.startswith("Feature: group.version "))
    assert re.sub(r"Epoch: \d+", "Epoch: 0", group_line) == line.format(1, 0)

    assert both(bootstrap, "downgrade", "--feature", "group.version=0", "--dry-run")[:2] == (
        0, "group.version can be downgraded to 0.\n")
    failed = both(bootstrap, "upgrade", "--feature", "group.version=2")
    assert failed[0] == 1
    assert failed[1].startswith("Could not upgrade group.version to 2. The update failed for all features")
    assert failed[2].strip().endswith("1 out of 1 operation(s) failed.")
    assert both(bootstrap, "upgrade", "--feature", "group.version")[0] == 1  # no '=': refused by both

    assert ours(bootstrap, "disable", "--feature", "group.version")[:2] == (0, "group.version was disabled.\n")
    wait_for(lambda: ours(bootstrap, "describe")[1] == line.format(0, 1), what="the downgrade read back")
    assert both(bootstrap, "describe")[1] == line.format(0, 1)
    assert kafka_tool(bootstrap, "upgrade", "--feature", "group.version=1")[:2] == (
        0, "group.version was upgraded to 1.\n")
    wait_for(lambda: ours(bootstrap, "describe")[1] == line.format(1, 2), what="the upgrade read back")
