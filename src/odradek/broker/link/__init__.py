"""A broker's side of the ZooKeeper-era cluster, one module per concern.

* :mod:`.membership`: the coordination session, the ephemeral ``/brokers/ids/{id}`` registration and its broker
  epoch, registering again after the session expires;
* :mod:`.controller_requests`: LeaderAndIsr, StopReplica and UpdateMetadata from the controller, fenced by the
  controller epoch and applied to the replica manager and the metadata cache;
* :mod:`.isr_propagation`: the leader's compare-and-set ISR writes and their batched change notifications;
* :mod:`.producer_id_blocks`: cluster-wide blocks of producer ids;
* :mod:`.config_watch`: topic config changes announced under ``/config/changes``;
* :mod:`.topic_admin`: topic administration through Kafka's znodes, as AdminZkClient does it;
* :mod:`.controlled_shutdown`: asking the controller to move this broker's leaderships away before it stops.

Each takes the narrow parts it works with (the session holder, the replica manager, the metadata cache), never
the broker; :class:`odradek.broker.server.Broker` wires them together.
"""
