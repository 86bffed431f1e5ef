"""The actor runtime and the actors that hold a broker's behaviour, grouped by what they hold:

    base        the actor runtime, services (long-running work), the Clock and the other
                ports, retries, loop slices, the state-change log
    admin       the admin rules: topics, configs, throttle configs, partition limits
    security    ACLs, the authorizer, each API's permission, SCRAM credentials
    replica     the replica manager: partitions, fetchers, fetch sessions, ISR changes,
                quotas, the metadata cache
    controller  the controller: events, event manager, context, state machines, election

A package imports only those above it in this list, and `replica` and `controller` neither
the other (tests/unit/test_layering.py). Nothing here touches ZooKeeper, sockets or files:
actors reach the outside world through the ports declared in `actors.base.ports`, which
`node/` implements for real and tests may fake.
"""
