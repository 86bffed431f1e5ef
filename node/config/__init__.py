"""The configuration every Keel process shares: properties files and their checked values
(`properties`), and the definitions brokers and the planner both take: ZooKeeper
(`zookeeper`), listeners, connection limits and metrics (`listeners`), the authorizer
(`authorizer`). Each process adds its own (node/broker/config.py, node/planner/config.py)."""
