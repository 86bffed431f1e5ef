"""Prometheus metrics of brokers and the planner: names, collectors, the HTTP endpoint."""
