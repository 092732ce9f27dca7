"""Kafka: client options and topic administration (connection), a service's clients,
the control channel and its protocol, partition keys, dead-letter headers.
"""
