"""Who may do what: Kafka's ACLs, the authorizer and its cache, which permission each API
needs, and the SCRAM credentials the listeners check."""
