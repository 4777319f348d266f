"""fsio helpers that user-owned files rely on."""

from __future__ import annotations

import stat
from pathlib import Path

from ctxstore import fsio


def test_mode_of_keeps_a_private_file_private_through_replace_atomic(tmp_path: Path) -> None:
    secret = tmp_path / "settings.json"
    secret.write_text("{}")
    secret.chmod(0o600)
    fsio.replace_atomic(secret, b'{"env": {"TOKEN": "x"}}', mode=fsio.mode_of(secret))
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert secret.read_bytes() == b'{"env": {"TOKEN": "x"}}'


def test_mode_of_a_missing_file_is_the_default(tmp_path: Path) -> None:
    assert fsio.mode_of(tmp_path / "absent") == 0o644
    assert fsio.mode_of(tmp_path / "absent", 0o600) == 0o600
