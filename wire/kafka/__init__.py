"""Kafka's binary protocol, for the listeners Kafka's own clients connect to: the codec (kio,
generated from Kafka's message specs), the advertised versions, and the translation of each
served API to and from Keel's (`wire.api`), which the same handlers then answer."""
