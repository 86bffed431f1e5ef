"""The actor runtime and the actors that hold a broker's behaviour.

Nothing here touches ZooKeeper, sockets or files: actors reach the outside world through
the ports declared in `actors.ports`, which `node/` implements for real and tests may fake.
"""
