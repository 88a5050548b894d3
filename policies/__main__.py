"""Entry point of the tenant-isolation policy pack.

The language host runs ``<venv>/bin/python -u <pack dir>`` (this file), with the virtualenv
from ``PulumiPolicy.yaml``. The pack serves the engine over gRPC until the engine stops it.
"""

import sys
from pathlib import Path

# The pack directory is sys.path[0]; its parent makes `policies` importable as a package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pulumi_policy import EnforcementLevel, PolicyPack  # noqa: E402

from policies.adapter import PACK_NAME, build_policies  # noqa: E402

if __name__ == "__main__":
    PolicyPack(
        name=PACK_NAME,
        policies=build_policies(),
        enforcement_level=EnforcementLevel.MANDATORY,
        description="Tenant isolation for composable GPU infrastructure: networks, clusters, hosts and DPUs, "
        "GPU compositions and sharing, credentials, BMC TLS, composer RBAC.",
    )
