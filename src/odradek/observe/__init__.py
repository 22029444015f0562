"""What operators see of a broker: Prometheus metrics and the live web console, on one small HTTP server.

* :mod:`.view` reads the broker's parts into plain data (gauges, groups and lag, the controller's recent
  transitions) on the broker's event loop;
* :mod:`.metrics` turns that and the hot-path counters of :mod:`odradek.broker.stats` into Prometheus families,
  named as jmx_exporter's example Kafka rules name Kafka's MBeans, in a registry of the broker's own;
* :mod:`.console` gathers every broker's view into the cluster picture the page shows;
* :mod:`.http` serves ``/metrics``, ``/`` (``console.html``), ``/api/cluster`` and ``/api/local``.

Nothing here changes the broker; it only reads it.
"""
