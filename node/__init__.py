"""Keel's processes and tools, on three floors; a package imports the floors below its own,
and on its floor only what is named before it (tests/unit/test_layering.py holds them to it).

Tools, the commands people run, each its own process:
    sim       the deterministic simulation (`keel-sim`): the broker's parts on a virtual
              network, ZooKeeper and clock
    cluster   the local-cluster library: ZooKeeper, broker, planner and console processes on
              this machine, and a cluster's state between commands
    chaos     a chaos run: a cluster behind fault-injecting proxies, a workload, a nemesis and
              the checks of what it saw
    cli       `keel` (the admin commands) and `keel-cluster`
    ui        `keel-ui`, the web console

Processes (neither imports the other):
    broker    `keel-node`: a Kafka broker in ZooKeeper mode, its controller included
    planner   `keel-planner`: the Spark sidecar that plans and executes reassignments

Libraries every process uses:
    command   the one error path and exit statuses, argument types, output
    security  TLS and SASL settings, JAAS, connection limits
    metrics   Prometheus names and the HTTP endpoint, loop lag
    zk        ZooKeeper: Kafka's znode layout and JSON, the client, the cluster store, ACLs
    clients   the admin client, producer and consumer over Keel's wire
    config    properties files and the definitions every process shares
"""
