"""Transactions (KIP-98): the transaction coordinator on ``__transaction_state``, its log format, the marker sender,
and the partition leader's verification that a partition was added to a transaction (KIP-890 part 1).

* :mod:`~odradek.broker.txn.state`: a transactional id's metadata and Kafka's state transitions (pure);
* :mod:`~odradek.broker.txn.decisions`: what each request gets, from the metadata alone (pure);
* :mod:`~odradek.broker.txn.log_format`: TransactionLogKey/TransactionLogValue, byte for byte Kafka's;
* :mod:`~odradek.broker.txn.coordinator`: loading, writing transitions, timeouts and expiration (the I/O);
* :mod:`~odradek.broker.txn.markers` and :mod:`~odradek.broker.txn.marker_writer`: COMMIT/ABORT markers, sent and
  written;
* :mod:`~odradek.broker.txn.service`: :class:`~odradek.broker.txn.service.Transactions`, what the broker holds.
"""
