"""A device farm on Ray: one sweep over many phones attached to many hosts (docs/farm.md).

- ``auth``: the farm's token (Ray's token authentication), made by the head, read by every
  host and driver, checked with the head before Ray connects;
- ``resources``: what a host advertises (one Ray resource per phone, one for itself) and how it
  finds its phones through its adb server;
- ``host``: the actors on a host (its agent; a worker per phone in use);
- ``phone``: a farm phone as the measure stage sees a device;
- ``driver``: the sweep over the farm's phones, into the local sweep's record store;
- ``cli``: ``latbench farm join | status`` and the ``latbench measure --farm`` switch.

Ray is imported by ``host``, ``phone`` and ``driver`` only; ``auth``, ``resources`` and ``cli`` load
without it, so the rest of the suite never pays Ray's import.
"""
