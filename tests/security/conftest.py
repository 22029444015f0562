"""A two-broker in-process cluster with the built-in authorizer; ANONYMOUS (every PLAINTEXT client, and the brokers
talking to each other) and ``User:admin`` are super users, so the tests administer it with real admin clients and
play other principals through the request context; and one set of test certificates per session (made with openssl,
never committed)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from acl_support import AUTHORIZER
from tls_certs import TestPki, make_pki

from odradek.testing import FAST_TEST_OVERRIDES, ThreadedCluster


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedCluster]:
    cluster = ThreadedCluster(2, Path(tmp_path_factory.mktemp("acl")) / "cluster",
                              overrides={**FAST_TEST_OVERRIDES, **AUTHORIZER}).start()
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> TestPki:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make test certificates")
    return make_pki(tmp_path_factory.mktemp("pki"))
