"""Redfish BMCs: typed models, a client, and Pulumi dynamic providers.

Layers (imports point one way): ``models``, ``errors`` ← ``client`` (the only module that
does I/O), ``posture`` (pure decisions over plain data) and ``inputs`` (the resources' inputs
as pydantic models) ← ``provider`` (the Pulumi resources ``DpuPosture`` and ``BiosAttributes``).
Import the module you need; this package imports nothing, so the client can be used without
loading Pulumi.
"""
