"""Redfish BMC simulator: a hardware stand-in for BlueField-3 DPU BMCs and host BMCs.

Nothing here is a real BMC. It follows the published Redfish shapes (DMTF DSP0266 and
schemas; NVIDIA BlueField BMC Software documentation for ``Systems/Bluefield``,
``Bios``/``Bios/Settings``, ``Oem/Nvidia`` ``Mode.Set``/``HostRshim.Set`` and
``Managers/Bluefield_BMC``, the host-privilege resources of each firmware generation in
``privileges``) closely enough for the project's Redfish client and dynamic
providers to be tested over real HTTP(S) on 127.0.0.1.

One process serves several BMCs, one port each::

    python -m lab.redfish_sim --host 127.0.0.1 --state-dir DIR [--tls] \\
        --bmc dpu-a=18441 --bmc dpu-old=18443:BF-24.04-5 --bmc bmc-host-a=18451 \\
        [--username root --password ...]   # or REDFISH_SIM_USERNAME / REDFISH_SIM_PASSWORD

DMTF's redfish-protocol-validator passes against it in the lab's mode (HTTPS, sessions); the
figures and every assertion it cannot test here, with the reason, are in ``CONFORMANCE.md``.
See ``protocol`` for the DSP0266 header/query rules and OData documents, ``state`` for the
behaviour chosen where the documentation is silent, ``control`` for
the test-only ``/_sim`` path, ``tls`` for the certificates (clients use ``DIR/tls/ca.pem``).
The simulator never imports the product's clients or providers.
"""
