"""Client quotas in the coordination store, where Kafka's ZooKeeper-era brokers keep them.

``/config/clients/<client-id>``, ``/config/users/<user>`` and ``/config/users/<user>/clients/<client-id>`` hold
``{"version":1,"config":{"producer_byte_rate":"1024",...}}`` (sanitized names, ``<default>`` for defaults), and each
change is announced by a ``/config/changes/config_change_<seq>`` with ``{"version":2,"entity_path":...}`` that every
broker's config watch reads. A user's znode also holds its SCRAM credentials, written by another part: a change here
reads the znode, changes only quota keys, and writes back with the version it read, trying again when someone else
wrote in between, so no key it does not own is ever lost. A znode left with no config and no children is deleted
(Kafka's ``tryCleanQuotaNodes``), again only at the version read.

On every registration (start, and a new session after expiry) every quota znode is read into the broker's
:class:`~odradek.broker.quotas.ClientQuotas`; afterwards the config watch hands each changed entity here. Request
handlers record what clients produce and fetch through it, on the broker's clock, and get the throttle time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from odradek.broker.link.membership import Membership
from odradek.broker.quotas import QUOTA_KEYS, ClientQuotas, QuotaEntity, principal_user, sanitize
from odradek.clock import Clock
from odradek.coordination import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError
from odradek.coordination import znodes as zn
from odradek.coordination.store import Session
from odradek.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

WRITE_ATTEMPTS = 10
"""Read-change-write rounds before giving up on a znode others keep changing (each round sees their write)."""


class ClientQuotaService:
    def __init__(self, membership: Membership, quotas: ClientQuotas, clock: Clock) -> None:
        self.membership = membership
        self.quotas = quotas
        self.clock = clock
        membership.on_registered(self.load_all)

    # --- enforcement (Kafka's KafkaApis around ClientQuotaManager) --------------------------------------------

    def throttle_produce(self, principal: str, client_id: str | None, size: int) -> int:
        """Record a produce request's size; the throttle time its client must wait (0: none)."""
        manager = self.quotas.produce
        if not manager.enabled:
            return 0
        return manager.record_and_get_throttle_ms(*_who(principal, client_id), size, self.clock.monotonic_ms())

    def fetch_limit(self, principal: str, client_id: str | None) -> float:
        """The most a consumer's fetch may return at once without being throttled for sure."""
        manager = self.quotas.fetch
        if not manager.enabled:
            return float("inf")
        return manager.max_value_in_quota_window(*_who(principal, client_id))

    def throttle_fetch(self, principal: str, client_id: str | None, size: int) -> int:
        """Record a consumer fetch response's size; when it must be throttled, take the recording back (the
        response then carries no data) and return the throttle time."""
        manager = self.quotas.fetch
        if not manager.enabled:
            return 0
        user, client = _who(principal, client_id)
        now = self.clock.monotonic_ms()
        throttle = manager.record_and_get_throttle_ms(user, client, size, now)
        if throttle > 0:
            manager.unrecord(user, client, size, now)
        return throttle

    # --- reads -------------------------------------------------------------------------------------------------

    async def read(self, entity: QuotaEntity) -> dict[str, str]:
        """The entity's whole config (quota keys and any others); empty when it has no znode."""
        return (await _read(self.membership.current(), zn.entity_config_path(entity.path)))[0]

    async def all_configs(self) -> dict[QuotaEntity, dict[str, str]]:
        """Every client, user and (user, client) entity with a znode, and its whole config."""
        session = self.membership.current()
        paths: list[str] = []
        for client in await _children(session, zn.CONFIG_CLIENTS):
            paths.append(f"clients/{client}")
        for user in await _children(session, zn.CONFIG_USERS):
            paths.append(f"users/{user}")
            for client in await _children(session, f"{zn.CONFIG_USERS}/{user}/clients"):
                paths.append(f"users/{user}/clients/{client}")
        out: dict[QuotaEntity, dict[str, str]] = {}
        results = await session.get_many([zn.entity_config_path(p) for p in paths])
        for path, result in zip(paths, results, strict=True):
            entity = QuotaEntity.from_path(path)
            if entity is None or not isinstance(result, tuple):
                continue
            parsed = zn.decode_or_skip(zn.EntityConfig.from_json, result[0], zn.entity_config_path(path))
            if parsed is not None:
                out[entity] = dict(parsed.config)
        return out

    # --- what the broker enforces ------------------------------------------------------------------------------

    async def load_all(self) -> None:
        configs = await self.all_configs()
        for entity, config in configs.items():
            self.quotas.apply_entity_config(entity, config)
        if configs:
            log.info("broker %d: loaded client quotas of %d entities", self.membership.broker_id, len(configs))

    async def entity_changed(self, entity_path: str) -> None:
        """A change notification for ``clients/...`` or ``users/...``: re-read that entity and apply it."""
        entity = QuotaEntity.from_path(entity_path)
        if entity is None:
            return
        try:
            config = await self.read(entity)
        except KafkaError as exc:
            log.warning("broker %d: ignoring the change of %s: %s", self.membership.broker_id, entity_path, exc)
            return
        self.quotas.apply_entity_config(entity, config)
        log.info("broker %d: client quotas of %s are now %s", self.membership.broker_id, entity_path,
                 {k: v for k, v in config.items() if k in QUOTA_KEYS} or "unset")

    # --- writes ------------------------------------------------------------------------------------------------

    async def alter(self, entity: QuotaEntity, change: Callable[[dict[str, str]], dict[str, str]]) -> None:
        """Apply ``change`` to the entity's quota keys (it gets and returns only those) and announce it.

        Keys that are no quotas (SCRAM credentials in a user's znode) are kept as they are in the store at the
        moment of the write, whatever was read before."""
        session = self.membership.current()
        path = zn.entity_config_path(entity.path)
        for _ in range(WRITE_ATTEMPTS):
            config, version = await _read(session, path)
            quotas = {k: v for k, v in config.items() if k in QUOTA_KEYS}
            others = {k: v for k, v in config.items() if k not in QUOTA_KEYS}
            new = {**others, **change(quotas)}
            try:
                if new or not await _delete_if_empty(session, path, entity, version):
                    data = zn.EntityConfig(new).to_json()
                    if version is None:
                        await session.create(path, data, make_parents=True)
                    else:
                        await session.set(path, data, version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue  # written or deleted by someone else meanwhile: read it again
            break
        else:
            raise KafkaError(ErrorCode.unknown_server_error, f"{path} kept changing; quota change not applied")
        await session.create(zn.CONFIG_CHANGE_PREFIX, zn.ConfigChangeNotification(entity.path).to_json(),
                             sequential=True)


def _who(principal: str, client_id: str | None) -> tuple[str, str]:
    """A request's sanitized user and client id, as the quota entities name them."""
    return sanitize(principal_user(principal)), sanitize(client_id or "")


async def _read(session: Session, path: str) -> tuple[dict[str, str], int | None]:
    """The config at ``path`` and the version read (None: no znode). A malformed znode is refused, not
    overwritten: it may hold what another part wrote."""
    try:
        data, stat = await session.get(path)
    except NoNodeError:
        return {}, None
    try:
        return dict(zn.EntityConfig.from_json(data, path).config), stat.version
    except zn.ZnodeDataError as exc:
        raise KafkaError(ErrorCode.unknown_server_error, f"{path} holds malformed data ({exc.reason})") from None


async def _children(session: Session, path: str) -> list[str]:
    try:
        return sorted(await session.children(path))
    except NoNodeError:
        return []


async def _delete_if_empty(session: Session, path: str, entity: QuotaEntity, version: int | None) -> bool:
    """Kafka's tryCleanQuotaNodes: an entity with no config left and no children goes, and for a (user, client)
    entity so do the user's ``clients`` znode and the user's own znode when they are left empty. True when the
    entity's znode is gone (or never was)."""
    if version is None:
        return True
    try:
        await session.delete(path, version)
    except NotEmptyError:
        return False
    if entity.user is not None and entity.client_id is not None:
        user_path = zn.entity_config_path(f"users/{entity.user}")
        try:
            await session.delete(f"{user_path}/clients")
            data, stat = await session.get(user_path)
            if not zn.EntityConfig.from_json(data, user_path).config:
                await session.delete(user_path, stat.version)
        except (NotEmptyError, NoNodeError, BadVersionError, zn.ZnodeDataError):
            pass  # someone else's key or child is there: it stays
    return True
