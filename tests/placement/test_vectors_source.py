"""Which file the recorded Kafka cases come from: the shared folder beside the checkout wins over the bundled copy."""

from __future__ import annotations

from pathlib import Path

import pytest

from . import vectors


def test_the_shared_copy_beside_the_checkout_is_read_when_present(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ODRADEK_KAFKA_VECTORS", raising=False)
    repo = Path(__file__).resolve().parents[2]
    assert repo.parent / "shared" / "reference" / "kafka-vectors.json" == vectors.SHARED
    if not vectors.SHARED.exists():
        pytest.skip("no shared folder beside this checkout")
    assert vectors.source() == vectors.SHARED


def test_without_the_shared_folder_the_bundled_copy_is_read(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("ODRADEK_KAFKA_VECTORS", raising=False)
    monkeypatch.setattr(vectors, "SHARED", tmp_path / "absent.json")
    assert vectors.source() == vectors.BUNDLED
    assert vectors.BUNDLED.exists()


def test_the_environment_override_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ODRADEK_KAFKA_VECTORS", str(tmp_path / "elsewhere.json"))
    assert vectors.source() == tmp_path / "elsewhere.json"
