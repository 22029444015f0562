"""DescribeClientQuotas' matching, pure, against the entities and expectations of Kafka's
ClientQuotasRequestTest.testDescribeClientQuotasMatchExact/MatchPartial (its two ip entities left out: odradek
stores no ip quotas, so every count below is Kafka's less the ip entities it would match)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from odradek.broker.apis.describe_client_quotas import DEFAULT_MATCH, EXACT, SPECIFIED, QuotaFilter, describe
from odradek.broker.quotas import DEFAULT, QuotaEntity, sanitize
from odradek.errors import ErrorCode, KafkaError

Name = str | None  # a name, None for the default entity


def _entity(user: Name | bool, client: Name | bool) -> QuotaEntity:
    """False: the entity has no such part; None: the default; a string: that name."""
    def part(name: Name | bool) -> str | None:
        if name is False:
            return None
        return DEFAULT if name is None else sanitize(str(name))

    return QuotaEntity(part(user), part(client))


ENTITIES = {
    _entity("user-1", "client-id-1"): 50.50,
    _entity("user-2", "client-id-1"): 51.51,
    _entity("user-3", "client-id-2"): 52.52,
    _entity(None, "client-id-1"): 53.53,
    _entity("user-1", None): 54.54,
    _entity("user-3", None): 55.55,
    _entity("user-1", False): 56.56,
    _entity("user-2", False): 57.57,
    _entity("user-3", False): 58.58,
    _entity(None, False): 59.59,
    _entity(False, "client-id-2"): 60.60,
}
CONFIGS = {e: {"request_percentage": repr(v)} for e, v in ENTITIES.items()}


def _component(kind: str, match_type: int, match: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(entity_type=kind, match_type=match_type, match=match)


def _found(components: list[SimpleNamespace], strict: bool) -> set[QuotaEntity]:
    return {entity for entity, _ in describe(CONFIGS, QuotaFilter.parse(components, strict))}


def test_exact_matches() -> None:
    for entity, value in ENTITIES.items():
        components = []
        for kind, name in (("user", entity.user), ("client-id", entity.client_id)):
            if name is not None:
                components.append(_component(kind, DEFAULT_MATCH) if name == DEFAULT else _component(kind, EXACT, name))
        found = describe(CONFIGS, QuotaFilter.parse(components, strict=True))
        assert found == [(entity, {"request_percentage": value})]
    for entity in (_entity("user-1", "client-id-2"), _entity("user-3", "client-id-1"), _entity("user-2", None),
                   _entity("user-4", False), _entity(None, "client-id-2"), _entity(False, "client-id-1"),
                   _entity(False, "client-id-3")):
        components = [_component(k, DEFAULT_MATCH) if n == DEFAULT else _component(k, EXACT, n)
                      for k, n in (("user", entity.user), ("client-id", entity.client_id)) if n is not None]
        assert _found(components, strict=True) == set()


@pytest.mark.parametrize("components,strict,expected", [
    ([_component("user", EXACT, "user-1")], False, 3),
    ([_component("user", EXACT, "unknown")], False, 0),
    ([_component("client-id", EXACT, "client-id-2")], False, 2),
    ([_component("user", DEFAULT_MATCH)], False, 2),
    ([_component("user", EXACT, "user-2")], True, 1),
    ([_component("client-id", EXACT, "client-id-1")], True, 0),
    ([_component("user", SPECIFIED)], True, 4),
    ([_component("user", SPECIFIED)], False, 10),
    ([_component("client-id", SPECIFIED)], True, 1),
    ([_component("client-id", SPECIFIED)], False, 7),
    ([_component("ip", SPECIFIED)], False, 0),  # Kafka: its 2 ip entities
    ([], False, 11),  # Kafka: 13, with its 2 ip entities
    ([], True, 0),
])
def test_partial_matches(components: list[SimpleNamespace], strict: bool, expected: int) -> None:
    assert len(_found(components, strict)) == expected


@pytest.mark.parametrize("components,code", [
    ([_component("ip", SPECIFIED), _component("user", SPECIFIED)], ErrorCode.invalid_request),
    ([_component("ip", SPECIFIED), _component("client-id", SPECIFIED)], ErrorCode.invalid_request),
    ([_component("user", SPECIFIED), _component("user", EXACT, "a")], ErrorCode.invalid_request),
    ([_component("", SPECIFIED)], ErrorCode.invalid_request),
    ([_component("user", 3)], ErrorCode.invalid_request),
    ([_component("other", SPECIFIED)], ErrorCode.unsupported_version),
])
def test_refused_filters(components: list[SimpleNamespace], code: ErrorCode) -> None:
    with pytest.raises(KafkaError) as info:
        QuotaFilter.parse(components, strict=False)
    assert info.value.code == code
