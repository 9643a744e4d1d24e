"""systemd notify protocol (sd_notify(3)): READY=1, WATCHDOG=1, STATUS=…, STOPPING=1.

Written from the documented protocol rather than a library: one AF_UNIX datagram per message to the
socket named by ``$NOTIFY_SOCKET`` (a leading "@" means the Linux abstract namespace). Source:
systemd manual sd_notify(3), "Notes" — the protocol is stable and documented for re-implementation.
Without ``NOTIFY_SOCKET`` (not under systemd) every call is a no-op.
"""

from __future__ import annotations

import os
import socket


class Notifier:
    """Sends sd_notify messages; ``watchdog_usec`` comes from ``$WATCHDOG_USEC`` when systemd sets it."""

    def __init__(self, address: str | None = None) -> None:
        self.address = address if address is not None else os.environ.get("NOTIFY_SOCKET")
        usec = os.environ.get("WATCHDOG_USEC")
        self.watchdog_usec = int(usec) if usec and usec.isdigit() else None
        self._last_status: str | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.address)

    def send(self, **fields: str | int) -> bool:
        """Send ``KEY=value`` lines in one datagram. Returns False when not under systemd or on error."""
        if not self.address:
            return False
        addr = self.address
        if addr.startswith("@"):
            addr = "\0" + addr[1:]
        msg = "\n".join(f"{k}={v}" for k, v in fields.items()).encode()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
                # Never block the daemon on a slow reader: a full socket queue drops the message.
                s.setblocking(False)
                s.sendto(msg, addr)
            return True
        except OSError:
            return False

    def ready(self, status: str = "") -> bool:
        return self.send(READY=1, STATUS=status) if status else self.send(READY=1)

    def watchdog(self) -> bool:
        return self.send(WATCHDOG=1)

    def status(self, text: str) -> bool:
        """Send STATUS= only when the text changed (systemctl shows the latest one)."""
        text = text.replace("\n", " ")[:200]
        if text == self._last_status:
            return True
        self._last_status = text
        return self.send(STATUS=text)

    def stopping(self) -> bool:
        return self.send(STOPPING=1)
