"""The sandbox's seccomp filter, compiled with libseccomp (Debian's libseccomp2, through ctypes)
and handed to bubblewrap (`--seccomp FD`), which loads it just before the kernel starts.

It refuses (EPERM) what code computing over data never needs and what widens the kernel's
attack surface: new namespaces (and so nested user namespaces), mounting, tracing other
processes, loading kernel code or BPF programs, perf events, userfaultfd, io_uring, the key
store, handles to host files, and faking terminal input. `clone3` answers ENOSYS, so glibc falls
back to `clone`, whose namespace flags are then refused. Where libseccomp is missing the
sandbox runs without the filter (its namespaces and limits still hold) and the log says so.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import os
from functools import cache

log = logging.getLogger(__name__)

SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_EQ = 4
SCMP_CMP_MASKED_EQ = 7
DENIED = (
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsmount",
    "fspick",
    "unshare",
    "setns",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "keyctl",
    "add_key",
    "request_key",
    "open_by_handle_at",
    "name_to_handle_at",
    "acct",
    "swapon",
    "swapoff",
    "reboot",
    "syslog",
    "quotactl",
    "personality",
    "lookup_dcookie",
    "mbind",
    "migrate_pages",
    "move_pages",
)
# CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET.
NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)
TIOCSTI = 0x5412


class ArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


def _errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


@cache
def _library() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name)
    except OSError:
        log.warning("libseccomp is not installed: sandboxes run without a seccomp filter")
        return None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    return lib


def _rule(lib: ctypes.CDLL, ctx: int, action: int, name: str, *conditions: ArgCmp) -> None:
    number = lib.seccomp_syscall_resolve_name(name.encode())
    if number < 0:
        return  # not a system call on this architecture
    result = lib.seccomp_rule_add(
        ctypes.c_void_p(ctx), ctypes.c_uint32(action), ctypes.c_int(number), ctypes.c_uint(len(conditions)), *conditions
    )
    if result < 0:
        raise OSError(-result, f"seccomp rule for {name}")


def filter_fd() -> int | None:
    """A file descriptor holding the compiled filter, at its start (the caller closes it), or
    None when libseccomp is not there."""
    lib = _library()
    if lib is None:
        return None
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        return None
    try:
        for name in DENIED:
            _rule(lib, ctx, _errno(errno.EPERM), name)
        _rule(lib, ctx, _errno(errno.ENOSYS), "clone3")
        for flag in NAMESPACE_FLAGS:
            _rule(lib, ctx, _errno(errno.EPERM), "clone", ArgCmp(0, SCMP_CMP_MASKED_EQ, flag, flag))
        _rule(lib, ctx, _errno(errno.EPERM), "ioctl", ArgCmp(1, SCMP_CMP_MASKED_EQ, 0xFFFFFFFF, TIOCSTI))
        fd = os.memfd_create("sandbox-seccomp")
        if lib.seccomp_export_bpf(ctypes.c_void_p(ctx), fd) < 0:
            os.close(fd)
            raise OSError("exporting the seccomp filter failed")
        os.lseek(fd, 0, os.SEEK_SET)
        return fd
    finally:
        lib.seccomp_release(ctypes.c_void_p(ctx))
