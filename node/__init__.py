"""A Keel broker process: config, the ZooKeeper store, the RPC server wiring, startup and
shutdown, the embedded ZooKeeper launcher, the local-cluster script and the client CLI."""
