"""The connector's jars match the pinned pyspark and never repeat a jar pyspark ships."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pyspark

from odradek.apache_kafka import jars
from odradek.apache_kafka.spark import connector_jars

ROOT = Path(__file__).resolve().parents[2]


def test_the_connector_matches_the_pinned_pyspark() -> None:
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["spark"]
    pins = [re.fullmatch(r"pyspark==(.+)", d) for d in extra]
    assert [m.group(1) for m in pins if m] == [jars.SPARK_VERSION] == [pyspark.__version__]
    assert jars.spark_connector_artifacts() == [("org.apache.spark", "spark-sql-kafka-0-10_2.13", jars.SPARK_VERSION)]


def test_spark_jars_hold_the_connector_and_nothing_pyspark_ships() -> None:
    names = [j.name for j in connector_jars()]
    assert f"spark-sql-kafka-0-10_2.13-{jars.SPARK_VERSION}.jar" in names
    assert any(n.startswith("kafka-clients-") for n in names)
    assert any(n.startswith("commons-pool2-") for n in names)
    shipped = {j.name for j in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    assert not any(n.startswith(("scala-library-", "hadoop-client-", "slf4j-api-")) for n in names)
    assert not set(names) & shipped
