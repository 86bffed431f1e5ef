"""A broker's replica side: the replica manager actor, its partitions and its metadata cache."""
