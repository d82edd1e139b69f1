"""Shared fixtures: small inventories written as YAML, and a throwaway PostgreSQL server.

The PostgreSQL fixture uses, in order: ``LLMSIZER_TEST_PG_URL`` (an existing server), else Debian's binaries
(``apt-get install -y postgresql``: /usr/lib/postgresql/*/bin/initdb and pg_ctl) to start a private server in a
temporary folder on a free localhost port, run as the ``postgres`` user when the tests run as root. Tests that need
it are skipped with the reason when neither is available.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import textwrap
from collections.abc import Iterator

import pytest

from llmsizer.provider.inventory import Inventory, parse_inventory


def inv(text: str) -> Inventory:
    return parse_inventory(textwrap.dedent(text), source="inv.yaml")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pg_bin() -> str | None:
    for pattern in ("/usr/lib/postgresql/*/bin",):
        for d in sorted(glob.glob(pattern), reverse=True):
            if os.path.exists(os.path.join(d, "initdb")) and os.path.exists(os.path.join(d, "pg_ctl")):
                return d
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb and shutil.which("pg_ctl") else None


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    url = os.environ.get("LLMSIZER_TEST_PG_URL")
    if url:
        yield url
        return
    pytest.importorskip("psycopg", reason="psycopg 3 is not installed (pip install 'psycopg[binary]')")
    bindir = _pg_bin()
    if bindir is None:
        pytest.skip("no PostgreSQL server: set LLMSIZER_TEST_PG_URL or `apt-get install -y postgresql`")
    root = os.geteuid() == 0
    if root:
        try:
            import pwd
            pw = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no 'postgres' user to run the test server as")
    tmp = tempfile.mkdtemp(prefix="llmsizer-pg-")
    data = os.path.join(tmp, "data")
    if root:
        os.chown(tmp, pw.pw_uid, pw.pw_gid)
    prefix = ["runuser", "-u", "postgres", "--"] if root else []
    port = _free_port()
    log = os.path.join(tmp, "server.log")
    try:
        subprocess.run([*prefix, f"{bindir}/initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8"],
                       check=True, capture_output=True, timeout=120)
        subprocess.run([*prefix, f"{bindir}/pg_ctl", "-D", data, "-l", log, "-w", "-t", "60", "-o",
                        f"-p {port} -k {tmp} -c listen_addresses=127.0.0.1 -c max_connections=100", "start"],
                       check=True, capture_output=True, timeout=120)
    except (subprocess.SubprocessError, OSError) as e:
        shutil.rmtree(tmp, ignore_errors=True)
        pytest.skip(f"could not start a PostgreSQL test server with {bindir}: {e}")
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*prefix, f"{bindir}/pg_ctl", "-D", data, "-m", "immediate", "stop"], capture_output=True,
                       timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)
