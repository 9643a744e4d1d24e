"""The listen backlog of a server process's TCP sockets, read from the kernel (sock_diag netlink).

A listening socket's accept queue holds at most ``min(backlog asked in listen(), net.core.somaxconn at
that call)`` connections; ``ss -ltn`` shows it as Send-Q. The kernel reports it as ``idiag_wqueue`` of
an ``inet_diag_msg`` for a socket in state LISTEN (Linux man page sock_diag(7); kernel
Documentation/admin-guide/sysctl/net.rst, somaxconn: "Limit of socket listen() backlog"). The sockets
of a process are the ``socket:[inode]`` links of /proc/<pid>/fd, matched with ``idiag_inode``. The
netlink dump is pyroute2's ``DiagSocket`` (no message parsing of our own).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from pyroute2.netlink.diag import SS_LISTEN, DiagSocket
from pyroute2.netlink.exceptions import NetlinkError


def socket_inodes(pid: int, proc: str = "/proc") -> set[int]:
    """Inodes of the sockets process ``pid`` holds open (empty when /proc/<pid>/fd cannot be read)."""
    out: set[int] = set()
    try:
        fds = list(Path(f"{proc}/{pid}/fd").iterdir())
    except OSError:
        return out
    for fd in fds:
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            out.add(int(target[8:-1]))
    return out


def listening_backlogs() -> dict[int, int]:
    """Socket inode → accept-queue limit of every listening TCP socket (IPv4 and IPv6) of this network
    namespace; empty when netlink sock_diag is unavailable."""
    out: dict[int, int] = {}
    try:
        with DiagSocket() as ds:
            ds.bind()
            for family in (socket.AF_INET, socket.AF_INET6):
                for msg in ds.get_sock_stats(family=family, states=1 << SS_LISTEN):
                    out[int(msg["idiag_inode"])] = int(msg["idiag_wqueue"])
    except (OSError, NetlinkError):
        return out
    return out


def listen_backlog(pid: int | None, proc: str = "/proc") -> int | None:
    """The largest accept-queue limit among the TCP sockets process ``pid`` listens on; None when the
    process is unknown, listens on no TCP socket of this namespace, or cannot be read."""
    if not pid:
        return None
    inodes = socket_inodes(pid, proc)
    if not inodes:
        return None
    mine = [backlog for inode, backlog in listening_backlogs().items() if inode in inodes]
    return max(mine) if mine else None
