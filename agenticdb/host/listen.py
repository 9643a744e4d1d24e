"""The listen backlog of a server process's TCP sockets, read from the kernel (sock_diag netlink).

A listening socket's accept queue holds at most ``min(backlog asked in listen(), net.core.somaxconn at
that call)`` connections; ``ss -ltn`` shows it as Send-Q. The kernel reports it as ``idiag_wqueue`` of
an ``inet_diag_msg`` for a socket in state LISTEN (Linux man page sock_diag(7); kernel
Documentation/admin-guide/sysctl/net.rst, somaxconn: "Limit of socket listen() backlog"). The sockets
of a process are the ``socket:[inode]`` links of /proc/<pid>/fd, matched with ``idiag_inode``.
"""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path

_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST, _NLM_F_DUMP = 0x1, 0x300
_NLMSG_DONE, _NLMSG_ERROR = 3, 2
_TCP_LISTEN = 10
_HDR = struct.Struct("=IHHII")  # nlmsghdr: len, type, flags, seq, pid
_REQ = struct.Struct("=BBBBI48x")  # inet_diag_req_v2: family, protocol, ext, pad, states, id (zeroed)
_MSG = struct.Struct("=BBBB48xIIIII")  # inet_diag_msg: family, state, timer, retrans, id, expires, rq, wq, uid, inode


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
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            out.update(_dump(family))
        except OSError:
            continue
    return out


def _dump(family: int) -> dict[int, int]:
    req = _REQ.pack(family, socket.IPPROTO_TCP, 0, 0, 1 << _TCP_LISTEN)
    msg = _HDR.pack(_HDR.size + len(req), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST | _NLM_F_DUMP, 1, 0) + req
    out: dict[int, int] = {}
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 4) as nl:  # NETLINK_SOCK_DIAG = 4
        nl.settimeout(2.0)
        nl.sendto(msg, (0, 0))
        while True:
            data = nl.recv(65536)
            offset = 0
            while offset + _HDR.size <= len(data):
                length, kind, _, _, _ = _HDR.unpack_from(data, offset)
                if kind in (_NLMSG_DONE, _NLMSG_ERROR) or length < _HDR.size:
                    return out
                body = offset + _HDR.size
                if length - _HDR.size >= _MSG.size:
                    _, state, _, _, _, _, wqueue, _, inode = _MSG.unpack_from(data, body)
                    if state == _TCP_LISTEN:
                        out[inode] = wqueue
                offset += (length + 3) & ~3


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
