"""Running a program without network: LibreOffice loads what a document names by URL (an HTML page's
images and style sheets, an Office file's linked pictures), so a document could make this machine fetch
internal URLs (SSRF). `offline_prefix()` is the command prefix that runs it in a network namespace of its
own (`unshare --net`; in a user namespace mapped to root where this is no root), holding only a loopback
that is down; [] when `Settings.office_network` allows the network, or where no namespace can be made
(not Linux, user namespaces off: a warning says so once)."""

from __future__ import annotations

import logging
import shutil
import subprocess

log = logging.getLogger(__name__)

_ISOLATION: list[list[str]] = []  # the command prefix found (one entry once known)


def network_isolation() -> list[str]:
    """The command prefix that runs a program without network (`unshare` into a network namespace of its
    own, mapped to root in a user namespace where this is no root), [] when none can be made here."""
    if not _ISOLATION:
        prefix: list[str] = []
        exe = shutil.which("unshare")
        if exe:
            for cand in ([exe, "--net"], [exe, "--user", "--map-root-user", "--net"]):
                try:
                    ok = subprocess.run([*cand, "true"], capture_output=True, timeout=10).returncode == 0
                except (OSError, subprocess.SubprocessError):
                    ok = False
                if ok:
                    prefix = cand
                    break
        if not prefix:
            log.warning(
                "LibreOffice runs with network access: no network namespace can be made here (unshare); "
                "a document's remote images or links may be fetched"
            )
        _ISOLATION.append(prefix)
    return _ISOLATION[0]


def offline_prefix() -> list[str]:
    """The prefix for LibreOffice's command: no network unless the settings allow it."""
    from ocrserve.settings import get_settings

    return [] if get_settings().office_network else network_isolation()
