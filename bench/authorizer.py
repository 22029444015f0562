"""The cost of authorization on the hot path: one decision, fresh and cached, with many ACLs.

Usage: ``PYTHONPATH=src python bench/authorizer.py [--acls N]``. Builds N literal topic ACLs plus N/10 prefixed
ones for 100 principals, then times (a) the check without an authorizer (the attribute test every produce and fetch
makes), (b) a cached decision, (c) a fresh decision, (d) authorizing a 100-topic produce request's topics through
``authz.authorized_names``, (e) applying one ACL change, (f) building the whole index.
"""

from __future__ import annotations

import argparse
import time
import types

from odradek.broker import authz
from odradek.security.acl import AccessControlEntry, Operation, PatternType, Permission, ResourcePattern, ResourceType
from odradek.security.authorizer import Authorizer


def _per_call(fn: object, rounds: int) -> float:
    start = time.perf_counter()
    for _ in range(rounds):
        fn()  # type: ignore[operator]
    return (time.perf_counter() - start) / rounds * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--acls", type=int, default=10_000)
    args = parser.parse_args()
    acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
    for i in range(args.acls):
        entry = AccessControlEntry(f"User:u{i % 100}", "*", Operation.WRITE, Permission.ALLOW)
        acls[ResourcePattern(ResourceType.TOPIC, f"topic-{i}")] = frozenset({entry})
    for i in range(args.acls // 10):
        entry = AccessControlEntry(f"User:u{i % 100}", "*", Operation.READ, Permission.ALLOW)
        acls[ResourcePattern(ResourceType.TOPIC, f"team-{i}-", PatternType.PREFIXED)] = frozenset({entry})
    authorizer = Authorizer()
    authorizer.replace_all(acls)
    topic = f"topic-{args.acls // 2}"
    principal = f"User:u{(args.acls // 2) % 100}"

    def cached() -> bool:
        return authorizer.authorize(principal, "10.0.0.1", Operation.WRITE, ResourceType.TOPIC, topic)

    hosts = iter(range(10**9))

    def fresh() -> bool:  # a host never seen: the decision is computed, then cached
        return authorizer.authorize(principal, f"10.{next(hosts)}", Operation.WRITE, ResourceType.TOPIC, topic)

    def one_change() -> None:
        pattern = ResourcePattern(ResourceType.TOPIC, "team-0-", PatternType.PREFIXED)
        authorizer.set_acls(pattern, acls[pattern] if pattern not in authorizer.index.by_pattern else frozenset())

    replace_us = _per_call(lambda: authorizer.replace_all(acls), 20)
    change_us = _per_call(one_change, 200)
    authorizer.replace_all(acls)
    services_off = types.SimpleNamespace(authorizer=None)
    services_on = types.SimpleNamespace(authorizer=authorizer)
    off = types.SimpleNamespace(services=services_off, principal=principal, client_host="10.0.0.1")
    on = types.SimpleNamespace(services=services_on, principal=principal, client_host="10.0.0.1")
    names = [f"topic-{i}" for i in range(100)]
    rows = [
        ("no authorizer: the check in Produce/Fetch", _per_call(lambda: services_off.authorizer is not None, 200_000)),
        ("cached decision", _per_call(cached, 200_000)),
        ("fresh decision (not cached yet)", _per_call(fresh, 20_000)),
        ("100-topic request, no authorizer (authorized_names)",
         _per_call(lambda: authz.authorized_names(off, Operation.WRITE, ResourceType.TOPIC, names), 2_000)),  # type: ignore[arg-type]
        ("100-topic request, cached decisions",
         _per_call(lambda: authz.authorized_names(on, Operation.WRITE, ResourceType.TOPIC, names), 2_000)),  # type: ignore[arg-type]
        ("one ACL change applied (a prefixed pattern added or removed)", change_us),
        ("whole index built (start-up, session re-established)", replace_us),
    ]
    print(f"{len(acls)} resource patterns")
    for label, us in rows:
        print(f"{label:58s} {us:10.2f} us")


if __name__ == "__main__":
    main()
