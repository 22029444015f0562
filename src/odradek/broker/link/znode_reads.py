"""Reads of topic znodes that several of the broker's cluster parts need (configs and topic ids)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterable

from odradek.coordination import Session
from odradek.coordination import znodes as zn


async def topic_configs(session: Session, topics: Iterable[str]) -> dict[str, dict[str, str]]:
    """``/config/topics/{topic}`` overrides of each topic that has them (topics without a znode are left out)."""
    names = sorted(set(topics))
    if not names:
        return {}
    results = await session.get_many([zn.topic_config_path(t) for t in names])
    out: dict[str, dict[str, str]] = {}
    for topic, result in zip(names, results, strict=True):
        if isinstance(result, tuple):
            parsed = zn.decode_or_skip(zn.TopicConfig.from_json, result[0], zn.topic_config_path(topic))
            if parsed is not None:
                out[topic] = dict(parsed.config)
    return out


async def all_topic_configs(session: Session) -> dict[str, dict[str, str]]:
    return await topic_configs(session, await session.children(zn.CONFIG_TOPICS))


async def topic_ids(session: Session, topics: Iterable[str]) -> dict[str, uuid.UUID]:
    """The ids recorded in the topics' assignment znodes (a topic written by an older tool may have none)."""
    names = sorted(set(topics))
    if not names:
        return {}
    out: dict[str, uuid.UUID] = {}
    results = await session.get_many([zn.topic_path(t) for t in names])
    for topic, result in zip(names, results, strict=True):
        if isinstance(result, tuple):
            parsed = zn.decode_or_skip(zn.TopicAssignment.from_json, result[0], zn.topic_path(topic))
            if parsed is not None and parsed.topic_id:
                with contextlib.suppress(ValueError):
                    out[topic] = uuid.UUID(parsed.topic_id)
    return out
