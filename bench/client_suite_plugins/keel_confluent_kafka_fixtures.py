"""confluent-kafka-python's `tests/integration`, on an existing cluster without its extras.

Loaded with `-p keel_confluent_kafka_fixtures` by `bench.client_suites` from a scratch
directory. The suite's conftest aims at an existing cluster when `BROKERS` is set (its
`ByoFixture`), but `cluster_fixture.py` imports trivup (which starts clusters from Kafka's
binaries) and the Schema Registry clients at its top, and those need packages (authlib,
httpx, requests, fastavro) that the client does not install; so does the legacy Avro
consumer that `tests.common.schema_registry` imports beside the consumer every test uses.
With `BROKERS` none of them is used: where one cannot be imported, a module that raises when
used stands in for it, so that the Schema Registry's tests (not selected by the runner)
would fail saying so.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any


class Unavailable:
    """A name from a module that cannot be imported here."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("not installed for this run: the suite is aimed at an existing cluster")


def _stand_in(module: str, *names: str) -> None:
    """`module`, or where it cannot be imported, a stand-in for it (and for its packages
    that could not be imported either) holding `names`."""
    try:
        importlib.import_module(module)
    except ImportError:
        parts = module.split(".")
        for depth in range(1, len(parts) + 1):
            name = ".".join(parts[:depth])
            if depth < len(parts) and name in sys.modules:
                continue
            stub = types.ModuleType(name)
            stub.__path__ = []  # a package, so that its submodules can be stood in for too
            sys.modules[name] = stub
        for attribute in names:
            setattr(sys.modules[module], attribute, type(attribute, (Unavailable,), {}))


_stand_in("trivup.clusters.KafkaCluster", "KafkaCluster")
_stand_in("confluent_kafka.schema_registry.schema_registry_client", "SchemaRegistryClient")
_stand_in("confluent_kafka.schema_registry._async.schema_registry_client", "AsyncSchemaRegistryClient")
_stand_in("confluent_kafka.avro", "AvroConsumer")  # for the suite's own TestAvroConsumer
