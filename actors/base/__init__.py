"""What every actor stands on: the actor runtime, the Clock port and the other ports that `node/`
implements (ZooKeeper, the brokers' channels, storage, the replica link), retries, work
in slices of the event loop, and the state-change log."""
