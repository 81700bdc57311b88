"""``rooftop profile P --export-hlo DIR``: the HLO modules a profile carries, one text file each."""

from __future__ import annotations

import os

from rooftop.errors import InvalidConfigError, shown
from rooftop.report.files import replacing


def check_export_dir(path: str) -> None:
    """``path`` is a folder, or a name a folder can be made at (its parent exists), checked before the
    profile is read."""
    if not path.strip():
        raise InvalidConfigError("--export-hlo is empty: give a folder to write the HLO modules into")
    if os.path.exists(path) and not os.path.isdir(path):
        raise InvalidConfigError(f"--export-hlo {shown(path)} is a file: give a folder")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(path) and not os.path.isdir(parent):
        raise InvalidConfigError(f"--export-hlo {shown(path)}: its parent folder {shown(parent)} does not exist")


def write_modules(folder: str, texts: dict[str, str]) -> list[str]:
    """Write each ``file name -> HLO text`` into ``folder`` (made if missing), each file atomically; the
    paths written. The texts are all printed before the first file is written."""
    check_export_dir(folder)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise InvalidConfigError(f"cannot make --export-hlo folder {shown(folder)}: {exc.strerror or exc}") from None
    written = []
    for name, text in texts.items():
        path = os.path.join(folder, name)
        with replacing(path, "HLO module") as tmp, open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        written.append(path)
    return written
