"""ZooKeeper: Kafka's layout and JSON (`paths`, `data`), a thin aiozk client with session
tracking (`client`), the ClusterStore port over it (`store`), and the embedded server
launcher (`embedded`)."""
