"""HARDWARE STAND-INS for the tools host/DPU preparation runs over SSH.

Each module is a script the lab sshd puts first on the SSH user's ``PATH`` (through a small
wrapper named like the real tool) and runs with the system ``/usr/bin/python3``, stdlib
only: ``mlxconfig``, ``mlxfwreset``, ``update-grub``, ``update-initramfs``, ``reboot``. They
keep state in files under ``$STANDIN_SYSROOT`` and log every invocation (see
:mod:`lab.sshd.standins._standin`). They are not the real tools.
"""

#: Real tool name -> stand-in module file.
TOOLS = {
    "mlxconfig": "mlxconfig.py",
    "mlxfwreset": "mlxfwreset.py",
    "update-grub": "update_grub.py",
    "update-initramfs": "update_initramfs.py",
    "reboot": "reboot.py",
}
