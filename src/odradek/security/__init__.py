"""Security as Kafka has it: listeners, SASL authentication (PLAIN, SCRAM), and the seams TLS and the authorizer
build on. The broker's connection asks :mod:`odradek.security.sasl` who a client is; everything here is decided
from bytes and settings, the sockets stay in :mod:`odradek.broker.connection`."""
