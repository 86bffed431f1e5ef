"""The web console, `bin/keel-ui`: the cluster as ZooKeeper, the brokers and the planner show it."""
