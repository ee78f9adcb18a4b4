"""Two network namespaces joined by a veth pair, for tests that play two
hosts: test-only addresses 10.214.N.1 and .2 that exist only inside them.
Needs root. Both namespaces (and with them the veth pair) are deleted at
the end, also when a check fails.

    with netns_pair("wsl") as (spaces, addrs):   # ("wsl123a", "wsl123b"), ("10.214.N.1", ...)
"""
import contextlib
import os
import subprocess
import zlib


def sh(*cmd, check=True):
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


@contextlib.contextmanager
def netns_pair(prefix):
    """`prefix` (up to 4 characters) names the namespaces and picks the
    subnet, so that tests of different prefixes running at once differ."""
    tag = str(os.getpid() % 100000)
    sub = 100 + (os.getpid() + zlib.crc32(prefix.encode())) % 100
    spaces = (f"{prefix}{tag}a", f"{prefix}{tag}b")
    devs = (f"v{prefix}{tag}a", f"v{prefix}{tag}b")
    addrs = (f"10.214.{sub}.1", f"10.214.{sub}.2")
    try:
        for space in spaces:
            sh("ip", "netns", "add", space)
        sh("ip", "link", "add", devs[0], "type", "veth", "peer", "name", devs[1])
        for space, dev, addr in zip(spaces, devs, addrs):
            sh("ip", "link", "set", dev, "netns", space)
            sh("ip", "-n", space, "addr", "add", f"{addr}/24", "dev", dev)
            sh("ip", "-n", space, "link", "set", dev, "up")
            sh("ip", "-n", space, "link", "set", "lo", "up")
        yield spaces, addrs
    finally:
        for space in spaces:
            sh("ip", "netns", "del", space, check=False)
