"""SCRAM credentials in Kafka's stored format."""

from __future__ import annotations

import pytest

from wire.credentials import CredentialFormatError, ScramCredential

# As `kafka-configs --alter --add-config 'SCRAM-SHA-256=[iterations=4096,password=alice-secret]'`
# stores it (the salt is random; these values are one such credential).
KAFKA_TEXT = (
    "salt=MWtxOG56cHNybGhoMmx0a2V1aWE1dzBlZnk=,"
    "stored_key=ihY3qjbj6AZ3c5JY8WzPBj96AJbHsVS9kGPmoJZQk9g=,"
    "server_key=UBXHD7sPk1sLRuMfhbCLvaGCZSt7OnO4/QM3oMYRt7A=,"
    "iterations=4096"
)


def test_a_credential_in_kafkas_format_reads_back_unchanged() -> None:
    credential = ScramCredential.from_kafka(KAFKA_TEXT)
    assert credential.iterations == 4096
    assert len(credential.stored_key) == 32
    assert credential.to_kafka() == KAFKA_TEXT


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("salt=AA==,stored_key=AA==,server_key=AA==", "missing iterations"),
        ("salt=AA==,stored_key=AA==,server_key=AA==,iterations=many", "not a number"),
        ("salt=!!,stored_key=AA==,server_key=AA==,iterations=4096", "salt is not base64"),
        ("password=secret", "unexpected 'password=secret'"),
    ],
)
def test_a_malformed_credential_says_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(CredentialFormatError, match=message):
        ScramCredential.from_kafka(text)
