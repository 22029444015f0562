"""Security as Kafka has it: listeners, SASL authentication (PLAIN, SCRAM), TLS (contexts from ``ssl.*``, principals
from client certificates) and the seams the authorizer builds on. The broker's connection asks
:mod:`odradek.security.sasl` and :mod:`odradek.security.tls` who a client is; everything here is decided from bytes
and settings, the sockets stay in :mod:`odradek.broker.connection`."""
