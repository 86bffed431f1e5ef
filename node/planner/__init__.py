"""The reassignment planner: a Spark sidecar that snapshots the cluster, computes
reassignment plans as DataFrame jobs, executes them through the controller and heals the
cluster when a broker is gone for good."""
