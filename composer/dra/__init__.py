"""The DRA placement mode's pure core: what the composer, as a Dynamic Resource Allocation driver,
publishes and decides, as plain values with no I/O.

:mod:`composer.dra.slices` turns the composer's view of the fabric into the ResourceSlices of the
driver :data:`composer.dra.slices.DRIVER` (``resource.k8s.io/v1``, Kubernetes 1.36): one device per
free fabric GPU, bound to the node the scheduler picks (``bindsToNode``) and held in the
scheduler's PreBind until the composer reports it attached and visible there.
:mod:`composer.dra.claims` reads ResourceClaims and builds the device status patch;
:mod:`composer.dra.binding` plans, per allocated claim, the compose and the binding or failure
conditions; :mod:`composer.dra.deviceclass` builds the driver's DeviceClass. The node jobs and
reclaim of DRA mode reuse device-plugin mode's phases (:mod:`composer.decide.dra_round`). The API
facts followed, with their upstream sources, are in docs/dra.md.
"""
