"""``ODRADEK_EVENT_LOOP`` picks the brokers' event loop: uvloop by default where installed, asyncio's on request."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from odradek import event_loop


def test_the_default_is_uvloop_when_installed_and_asyncio_otherwise() -> None:
    assert event_loop.choose(None, uvloop_installed=True) == "uvloop"
    assert event_loop.choose("", uvloop_installed=True) == "uvloop"
    assert event_loop.choose(None, uvloop_installed=False) == "asyncio"
    assert event_loop.choose("uvloop", uvloop_installed=False) == "asyncio"


def test_asyncio_opts_out_and_anything_else_is_refused() -> None:
    assert event_loop.choose("asyncio", uvloop_installed=True) == "asyncio"
    assert event_loop.choose(" AsyncIO ", uvloop_installed=True) == "asyncio"
    with pytest.raises(ValueError, match="ODRADEK_EVENT_LOOP='trio'"):
        event_loop.choose("trio", uvloop_installed=True)


def _loop_class() -> str:
    async def main() -> str:
        return type(asyncio.get_running_loop()).__module__

    return event_loop.run(main())


def test_run_uses_the_chosen_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    uvloop = pytest.importorskip("uvloop")
    monkeypatch.delenv(event_loop.ENV, raising=False)
    assert _loop_class() == uvloop.Loop.__module__
    monkeypatch.setenv(event_loop.ENV, "asyncio")
    assert _loop_class().startswith("asyncio")


def test_odradek_refuses_an_unknown_loop_with_a_clear_message(tmp_path) -> None:
    env = {"ODRADEK_EVENT_LOOP": "nonsense", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-m", "odradek", "up", "--port", "0", "--data-dir", str(tmp_path)],
                          env={**env, "PYTHONPATH": ":".join(sys.path)}, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "ODRADEK_EVENT_LOOP='nonsense'" in proc.stderr


async def test_async_tests_run_on_the_chosen_loop() -> None:
    """tests/conftest.py gives pytest-asyncio the factory ``ODRADEK_EVENT_LOOP`` picks: the brokers' loop."""
    chosen = event_loop.new_event_loop()
    chosen.close()
    assert type(asyncio.get_running_loop()) is type(chosen)
