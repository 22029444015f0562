"""What a request handler may use: the broker's parts, never the broker itself.

A handler in :mod:`odradek.broker.apis` reaches the replicas it reads and appends to, the metadata cache, topic
administration, the group and transaction coordinators, producer ids, client quotas, and (for the controller's APIs)
the controller or the applier of its requests. The broker builds one :class:`Services` when it starts. The parts are
the concrete classes, not interfaces narrowed to what requests need: nothing but review keeps a handler from calling
a method meant for the broker (stopping the replica manager, say). What a handler cannot reach is the
:class:`~odradek.broker.server.Broker` that starts, stops and wires the parts: only ``cluster.py`` and ``runner.py``
import it (the ``composition-root`` contract in ``pyproject.toml``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType

from odradek.broker.config import BrokerConfig
from odradek.broker.fetch_sessions import FetchSessionCache
from odradek.broker.group import GroupCoordinator
from odradek.broker.link.broker_configs import BrokerConfigService
from odradek.broker.link.client_quotas import ClientQuotaService
from odradek.broker.link.controller_requests import ControllerRequests
from odradek.broker.link.topic_admin import TopicAdmin
from odradek.broker.metadata import MetadataCache
from odradek.broker.producer_ids import ProducerIdManager
from odradek.broker.replica_manager import ReplicaManager
from odradek.broker.stats import BrokerStats
from odradek.broker.txn.service import Transactions
from odradek.controller import Controller
from odradek.security.authorizer import Authorizer


@dataclass(frozen=True, slots=True)
class Services:
    broker_id: int
    config: BrokerConfig
    metadata: MetadataCache
    replicas: ReplicaManager
    topics: TopicAdmin
    groups: GroupCoordinator
    transactions: Transactions
    producer_ids: ProducerIdManager
    controller: Controller
    controller_requests: ControllerRequests
    quotas: ClientQuotaService
    """Client quotas: their znodes (DescribeClientQuotas, AlterClientQuotas) and their enforcement (Produce, Fetch)."""
    broker_configs: BrokerConfigService
    """Dynamic broker configs (KIP-226): their znodes, read and written by the AlterConfigs APIs."""
    apis: Mapping[int, ModuleType]
    """The API registry: every module of :mod:`odradek.broker.apis`, by key (what ApiVersions advertises)."""
    stats: BrokerStats = field(default_factory=BrokerStats)
    """Counters for the metrics endpoint (bytes out to consumers, request times)."""
    authorizer: Authorizer | None = None
    """``authorizer.class.name``'s authorizer; None when none is configured (every request is allowed, as in
    Kafka), so the check on the produce and fetch path is one attribute test."""
    fetch_sessions: FetchSessionCache | None = None
    """Incremental fetch sessions (KIP-227); None serves every fetch sessionless."""
