"""Dynamic broker configs in the coordination store, where Kafka's ZooKeeper-era brokers keep them.

``/config/brokers/<id>`` holds one broker's dynamic configs and ``/config/brokers/<default>`` the cluster-wide
defaults, each ``{"version":1,"config":{...}}``; a change is written as AdminZkClient.changeBrokerConfig writes it
(the znode set, or created, whole) and announced by a ``/config/changes/config_change_<seq>`` with
``{"version":2,"entity_path":"brokers/<id>"}`` (or ``brokers/<default>``), which every broker's config watch reads.
Kafka 3.9 brokers on the same ZooKeeper read what this writes and the other way round.

Both znodes are read when the broker starts (before its logs open, so they open with the dynamic log defaults) and on
every registration; afterwards the config watch hands each changed entity here. What the broker applies of them is
what Kafka applies (:func:`odradek.broker.dynamic_config.usable`); the broker's parts that act on a change are told
through :attr:`BrokerConfigService.listeners`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from odradek.broker.config import BrokerConfig
from odradek.broker.dynamic_config import DEFAULT_ENTITY, usable
from odradek.broker.link.membership import Membership
from odradek.coordination import NoNodeError
from odradek.coordination import znodes as zn
from odradek.coordination.store import Session
from odradek.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

BROKERS = "brokers"


def entity_path(entity: str) -> str:
    """``brokers/<id>`` or ``brokers/<default>``: the change notification's entity path."""
    return f"{BROKERS}/{entity}"


class BrokerConfigService:
    def __init__(self, membership: Membership, config: BrokerConfig) -> None:
        self.membership = membership
        self.config = config
        self.listeners: list[Callable[[], None]] = []
        """Called after every change of the effective config (the log defaults, the advertised listeners...)."""
        membership.on_registered(self.load)

    @property
    def own_entity(self) -> str:
        return str(self.membership.broker_id)

    async def read(self, entity: str) -> dict[str, str]:
        """An entity's stored dynamic config, as stored (empty without a znode)."""
        return await _read(self.membership.current(), zn.entity_config_path(entity_path(entity)))

    async def load(self) -> None:
        """Read both znodes and apply them (start-up and every registration)."""
        default = await self.read(DEFAULT_ENTITY)
        own = await self.read(self.own_entity)
        self._apply(own, default)
        if own or default:
            log.info("broker %d: dynamic configs %s, cluster defaults %s", self.membership.broker_id,
                     sorted(self.config.dynamic_broker), sorted(self.config.dynamic_default))

    async def entity_changed(self, path: str) -> None:
        """A change notification: re-read the entity if it is this broker or the cluster default."""
        kind, _, entity = path.partition("/")
        if kind != BROKERS or entity not in (DEFAULT_ENTITY, self.own_entity):
            return
        try:
            stored = await self.read(entity)
        except KafkaError as exc:
            log.warning("broker %d: ignoring the change of %s: %s", self.membership.broker_id, path, exc)
            return
        if entity == DEFAULT_ENTITY:
            self._apply(self.config.dynamic_broker, stored)
        else:
            self._apply(stored, self.config.dynamic_default)
        log.info("broker %d: dynamic config of %s is now %s", self.membership.broker_id, path, sorted(stored))

    def _apply(self, own: dict[str, str], default: dict[str, str]) -> None:
        self.config.apply_dynamic(usable(own, per_broker=True), usable(default, per_broker=False))
        for listener in self.listeners:
            listener()

    async def write(self, entity: str, config: dict[str, str]) -> None:
        """AdminZkClient.changeBrokerConfig: the entity's whole config set (or created), then the notification."""
        session = self.membership.current()
        path = zn.entity_config_path(entity_path(entity))
        data = zn.EntityConfig(config).to_json()
        try:
            await session.set(path, data, -1)
        except NoNodeError:
            await session.create(path, data, make_parents=True)
        await session.create(zn.CONFIG_CHANGE_PREFIX, zn.ConfigChangeNotification(entity_path(entity)).to_json(),
                             sequential=True)


async def _read(session: Session, path: str) -> dict[str, str]:
    try:
        data, _stat = await session.get(path)
    except NoNodeError:
        return {}
    try:
        return dict(zn.EntityConfig.from_json(data, path).config)
    except zn.ZnodeDataError as exc:
        raise KafkaError(ErrorCode.unknown_server_error, f"{path} holds malformed data ({exc.reason})") from None
