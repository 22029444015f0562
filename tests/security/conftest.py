"""Fixtures of the security tests: one set of test certificates per session (made with openssl, never committed)."""

from __future__ import annotations

import shutil

import pytest
from tls_certs import TestPki, make_pki


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> TestPki:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make test certificates")
    return make_pki(tmp_path_factory.mktemp("pki"))
