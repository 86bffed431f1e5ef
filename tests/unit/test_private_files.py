"""Files holding secrets are never readable by others, not even for a moment (issue: hostile
clients; keel-cluster wrote broker properties with passwords under the default umask)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from node.cluster.certificates import CertificateAuthority
from node.cluster.local import LocalCluster
from node.cluster.private_files import private


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_private_file_is_0600_whatever_the_umask_or_its_mode_before(tmp_path: Path) -> None:
    before = os.umask(0o000)
    try:
        fresh = private(tmp_path / "fresh")
        existing = tmp_path / "existing"
        existing.write_text("old secret")
        existing.chmod(0o666)
        private(existing)
    finally:
        os.umask(before)
    assert (mode(fresh), mode(existing)) == (0o600, 0o600)
    assert existing.read_text() == "", "emptied, to be written"


def test_broker_properties_and_keystores_are_written_private(tmp_path: Path) -> None:
    before = os.umask(0o000)
    try:
        cluster = LocalCluster(tmp_path, "127.0.0.1:1")
        broker = cluster.new(1, {"sasl.jaas.config": "secret"}, home=tmp_path / "broker-1")
        broker.arguments()  # writes the properties file
        keystore = CertificateAuthority.create().write_keystore(tmp_path / "broker.pem", "broker")
    finally:
        os.umask(before)
    assert mode(broker.properties) == 0o600
    assert mode(keystore) == 0o600
