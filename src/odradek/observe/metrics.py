"""The broker's Prometheus metrics, in a registry of its own, named as jmx_exporter's example Kafka rules name them.

Kafka publishes MBeans such as ``kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions``; the
jmx_exporter rules most Kafka dashboards are built on turn that into
``kafka_server_replicamanager_underreplicatedpartitions`` and a meter such as ``MessagesInPerSec`` into
``kafka_server_brokertopicmetrics_messagesin_total``. Using the same names lets those dashboards and alerts work
unchanged. Consumer lag follows kafka-exporter (``kafka_consumergroup_lag``), which is what operators alert on.

Gauges are computed when scraped, from the broker's state (one custom collector); counters are plain integers the
hot paths bump (:class:`~odradek.broker.stats.BrokerStats`) and are only read here. Several brokers share one
process under ``odradek up --brokers N``, so each has its own :class:`CollectorRegistry`, never the global one
(which would also add the process's own Python metrics to every broker's page).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from types import ModuleType
from typing import Protocol

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from odradek.broker.fetch_sessions import FetchSessionCache
from odradek.broker.group import GroupCoordinator
from odradek.broker.replica_manager import ReplicaManager
from odradek.broker.stats import BrokerStats, Histogram
from odradek.controller import Controller
from odradek.observe.view import (
    broker_gauges,
    controller_gauges,
    group_offsets,
    local_high_watermark,
)

__all__ = ["BrokerParts", "api_name", "make_registry", "render"]


class BrokerParts(Protocol):
    """What the metrics read of a broker (the broker itself satisfies it)."""

    broker_id: int
    replicas: ReplicaManager
    groups: GroupCoordinator
    controller: Controller
    fetch_sessions: FetchSessionCache


def api_name(module: ModuleType) -> str:
    """Kafka's request name (``ListOffsets``) from an API module's name (``list_offsets``)."""
    return "".join(word.capitalize() for word in module.__name__.rsplit(".", 1)[-1].split("_"))


def _histogram(family: HistogramMetricFamily, labels: list[str], histogram: Histogram) -> None:
    family.add_metric(labels, histogram.cumulative(), histogram.sum)


class BrokerCollector(Collector):
    def __init__(self, broker: BrokerParts, apis: Mapping[int, ModuleType]) -> None:
        self._broker = broker
        self._names = {key: api_name(module) for key, module in apis.items()}

    def collect(self) -> Iterator[Metric]:
        broker = self._broker
        stats: BrokerStats = broker.replicas.stats
        yield from self._controller(broker.controller)
        yield from self._replica_manager(broker.replicas, stats)
        yield from self._topics(stats)
        yield from self._requests(stats)
        yield from self._fetch_sessions(broker.fetch_sessions)
        yield from self._groups(broker)
        yield from self._loop(stats)

    def _controller(self, controller: Controller) -> Iterator[Metric]:
        g = controller_gauges(controller)
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_activecontrollercount",
                                "1 on the active controller, 0 on every other broker", value=g.active)
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_offlinepartitionscount",
                                "Partitions without a live leader (active controller only)",
                                value=g.offline_partitions)
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_preferredreplicaimbalancecount",
                                "Partitions not led by their preferred (first) replica (active controller only)",
                                value=g.preferred_imbalance)
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_globalpartitioncount",
                                "Partitions in the cluster (active controller only)", value=g.global_partitions)
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_globaltopiccount",
                                "Topics in the cluster (active controller only)", value=g.global_topics)
        yield CounterMetricFamily("kafka_controller_controllerstats_uncleanleaderelections",
                                  "Leaders elected from outside the ISR by this broker as controller",
                                  value=controller.unclean_elections)

    def _replica_manager(self, replicas: ReplicaManager, stats: BrokerStats) -> Iterator[Metric]:
        g = broker_gauges(replicas)
        yield GaugeMetricFamily("kafka_server_replicamanager_partitioncount",
                                "Partition replicas on this broker", value=g.partitions)
        yield GaugeMetricFamily("kafka_server_replicamanager_leadercount",
                                "Partitions this broker leads", value=g.leaders)
        yield GaugeMetricFamily("kafka_server_replicamanager_underreplicatedpartitions",
                                "Partitions led here whose ISR is smaller than their replica set",
                                value=g.under_replicated)
        yield GaugeMetricFamily("kafka_server_replicamanager_underminisrpartitioncount",
                                "Partitions led here whose ISR is below min.insync.replicas", value=g.under_min_isr)
        yield GaugeMetricFamily("kafka_server_replicamanager_atminisrpartitioncount",
                                "Partitions led here whose ISR is exactly min.insync.replicas", value=g.at_min_isr)
        yield CounterMetricFamily("kafka_server_replicamanager_isrshrinks",
                                  "ISR shrinks written by this broker as leader", value=stats.isr_shrinks)
        yield CounterMetricFamily("kafka_server_replicamanager_isrexpands",
                                  "ISR expansions written by this broker as leader", value=stats.isr_expands)

    def _topics(self, stats: BrokerStats) -> Iterator[Metric]:
        for name, doc, values in (
            ("kafka_server_brokertopicmetrics_messagesin", "Records appended as leader", stats.messages_in),
            ("kafka_server_brokertopicmetrics_bytesin", "Bytes appended as leader (produce requests)",
             stats.bytes_in),
            ("kafka_server_brokertopicmetrics_bytesout", "Bytes sent to consumers (not to followers)",
             stats.bytes_out),
        ):
            family = CounterMetricFamily(name, doc, labels=["topic"])
            for topic, value in sorted(values.items()):
                family.add_metric([topic], value)
            yield family

    def _requests(self, stats: BrokerStats) -> Iterator[Metric]:
        counts = CounterMetricFamily("kafka_network_requestmetrics_requests", "Requests handled, per API",
                                     labels=["request"])
        times = HistogramMetricFamily("kafka_network_requestmetrics_totaltimems",
                                      "Time from a request read to its response written, per API (ms)",
                                      labels=["request"])
        request_bytes = CounterMetricFamily("kafka_network_requestmetrics_requestbytes",
                                            "Bytes of requests read, per API", labels=["request"])
        response_bytes = CounterMetricFamily("kafka_network_requestmetrics_responsebytes",
                                             "Bytes of responses written, per API", labels=["request"])
        for key, histogram in sorted(stats.requests.items()):
            label = [self._names.get(key, str(key))]
            counts.add_metric(label, histogram.count)
            _histogram(times, label, histogram)
            request_bytes.add_metric(label, stats.request_bytes.get(key, 0))
            response_bytes.add_metric(label, stats.response_bytes.get(key, 0))
        yield counts
        yield times
        yield request_bytes
        yield response_bytes

    def _fetch_sessions(self, cache: FetchSessionCache) -> Iterator[Metric]:
        yield GaugeMetricFamily("kafka_server_fetchsessioncache_numincrementalfetchsessions",
                                "Incremental fetch sessions (KIP-227) this broker keeps", value=len(cache))
        yield GaugeMetricFamily("kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
                                "Partitions held by those sessions", value=cache.partitions)
        yield CounterMetricFamily("kafka_server_fetchsessioncache_incrementalfetchsessionevictions",
                                  "Sessions evicted to make room for new ones", value=cache.evictions)

    def _groups(self, broker: BrokerParts) -> Iterator[Metric]:
        lag = GaugeMetricFamily("kafka_consumergroup_lag",
                                "High watermark minus committed offset, for groups this broker coordinates",
                                labels=["consumergroup", "topic", "partition"])
        current = GaugeMetricFamily("kafka_consumergroup_current_offset",
                                    "Committed offset, for groups this broker coordinates",
                                    labels=["consumergroup", "topic", "partition"])
        for entry in group_offsets(broker.groups, local_high_watermark(broker.replicas)):
            labels = [entry.group, entry.topic, str(entry.partition)]
            current.add_metric(labels, entry.committed)
            if entry.lag is not None:
                lag.add_metric(labels, entry.lag)
        yield lag
        yield current

    def _loop(self, stats: BrokerStats) -> Iterator[Metric]:
        # Collected on the event loop's own thread (the HTTP server runs there), so this thread's CPU time is the
        # time the loop spent running rather than waiting in select(): measured by the kernel, free on the hot path.
        yield CounterMetricFamily("odradek_eventloop_busy_seconds",
                                  "CPU time of the thread running the broker's event loop: time it ran callbacks "
                                  "rather than waited for I/O (shared by the brokers of one process)",
                                  value=time.thread_time())
        family = HistogramMetricFamily("odradek_eventloop_lag_seconds",
                                       "How late the broker's 100 ms tick woke: what requests waited behind")
        _histogram(family, [], stats.loop_lag)
        yield family


def make_registry(broker: BrokerParts, apis: Mapping[int, ModuleType]) -> CollectorRegistry:
    """A registry of the broker's own (never the process-global default one)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(broker, apis))
    return registry


def render(registry: CollectorRegistry) -> bytes:
    """The text exposition format (version 0.0.4), what ``/metrics`` answers."""
    return generate_latest(registry)
