"""Clients and Pulumi dynamic providers for the hardware control planes.

- ``dynamic_providers.director``: the LIQID Director (fabric manager) REST API.
- ``dynamic_providers.redfish``: Redfish BMCs (BlueField-3 DPU BMCs and host BMCs).
"""
