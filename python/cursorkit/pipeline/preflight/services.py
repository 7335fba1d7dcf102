"""Checks of the services a run needs: the Spark master answers, Java is there, ZooKeeper answers.

A TCP connect only, within :data:`CONNECT_TIMEOUT_S`; ``yarn``, ``k8s://…`` and other masters pass.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
from pathlib import Path

from cursorkit.errors import InvalidArgument

__all__ = ["CONNECT_TIMEOUT_S", "check_java", "check_master", "check_zookeeper", "unreachable"]

CONNECT_TIMEOUT_S = 2.0
"""How long a Spark master or a ZooKeeper server has to accept a TCP connection."""

_LOCAL_MASTER = re.compile(r"^local(\[(\*|[1-9]\d*)(,\s*[1-9]\d*)?\])?$|^local-cluster\[\d+,\s*\d+,\s*\d+\]$")


def check_master(master: str | None) -> None:
    """A ``spark://`` master (any of an HA list) accepts a TCP connection; ``local[...]`` is well formed.

    ``yarn``, ``k8s://…`` and other masters pass through to Spark.

    Raises:
        InvalidArgument: a malformed ``local`` master, or no master of the list answers (the message
            names each address and why).
    """
    if master is None:
        return
    if master.startswith("local"):
        if not _LOCAL_MASTER.fullmatch(master):
            raise InvalidArgument(
                f"--master {master}: expected local, local[N], local[*] or local[N,F] (max failures)"
            )
        return
    if not master.startswith("spark://"):
        return
    addresses = [a for a in master.removeprefix("spark://").rstrip("/").split(",") if a]
    if not addresses:
        raise InvalidArgument(f"--master {master}: no host:port after spark://")
    failures = []
    for address in addresses:
        host, port = _host_port(address, 7077, f"--master {master}")
        why = unreachable(host, port)
        if why is None:
            return
        failures.append(f"{host}:{port} ({why})")
    raise InvalidArgument(f"--master {master}: no Spark master answers at {', '.join(failures)}")


def check_java() -> None:
    """The Java that Spark's launcher would run exists: ``$JAVA_HOME/bin/java``, else ``java`` on PATH.

    Nothing is checked under spark-submit, whose JVM is already running.

    Raises:
        InvalidArgument: no such Java (the message says where it was looked for).
    """
    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        return
    home = os.environ.get("JAVA_HOME")
    if home:
        if not os.access(Path(home) / "bin" / "java", os.X_OK):
            raise InvalidArgument(
                f"Spark needs Java 17+, and JAVA_HOME={home} has no bin/java: set JAVA_HOME to a Java install"
            )
        return
    if shutil.which("java") is None:
        raise InvalidArgument("Spark needs Java 17+: no java on PATH and JAVA_HOME is not set")


def check_zookeeper(location: str) -> None:
    """``--cursor-store zk://hosts[/chroot]`` parses and a server of the ensemble accepts a connection.

    Raises:
        InvalidArgument: the location is malformed, or no server answers (naming each address).
    """
    from cursorkit.stores.location import parse_zk_root

    try:
        root = parse_zk_root(location)
    except InvalidArgument as e:
        raise InvalidArgument(f"--cursor-store must be zk://host:port[/chroot] ({e})") from None
    failures = []
    for address in root.hosts.split(","):
        host, port = _host_port(address, 2181, f"--cursor-store {location}")
        why = unreachable(host, port)
        if why is None:
            return
        failures.append(f"{host}:{port} ({why})")
    raise InvalidArgument(f"--cursor-store {location}: no ZooKeeper answers at {', '.join(failures)}")


def unreachable(host: str, port: int, timeout: float = CONNECT_TIMEOUT_S) -> str | None:
    """None if ``host:port`` accepts a TCP connection within ``timeout`` s, else why not."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except socket.gaierror as e:
        return f"unknown host: {e.strerror}"
    except TimeoutError:
        return f"no answer within {timeout:g} s"
    except OSError as e:
        return (e.strerror or str(e)).lower()


def _host_port(address: str, default: int, where: str) -> tuple[str, int]:
    """``host[:port]`` or ``[v6]:port`` split, with ``default`` when no port is given."""
    address = address.strip()
    if address.startswith("["):
        host, _, rest = address[1:].partition("]")
        port_text = rest.removeprefix(":")
    elif address.count(":") == 1:
        host, _, port_text = address.partition(":")
    else:
        host, port_text = address, ""
    try:
        port = int(port_text) if port_text else default
    except ValueError:
        raise InvalidArgument(f"{where}: {address!r} is not host:port") from None
    if not host or not 0 < port < 65536:
        raise InvalidArgument(f"{where}: {address!r} is not host:port")
    return host, port
