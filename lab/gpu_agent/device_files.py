"""Device files of the GPUs attached to each machine (lab only): what the DRA kubelet plugin finds.

On a real host the NVIDIA driver makes a device file (``/dev/nvidiaN``) for each GPU the node
sees. The lab's GPUs are simulated, so with ``--device-dir DIR`` the agent keeps
``DIR/<machine>/<DRA device name>`` (e.g. ``DIR/mgmt-1/gpu-7``) for every GPU the Director shows
attached to that machine, and removes it once the GPU is detached. The machine's name is its
Node's name, as for the adverts; the file's name is the GPU's device name in the composer's
ResourceSlices (:func:`domain.composer_mode.dra_device_name`). The kubelet plugin of DRA mode
(``node/kubeletplugin``, run with ``--device-dir DIR/<node>``) looks the allocated GPUs up there.

Each file is a character device with the numbers of ``/dev/null`` (1:3): a CDI ``deviceNodes``
entry needs a device node (the container runtime makes the node in the container from its
numbers), and a workload that opens it reads nothing. Making one needs CAP_MKNOD (root, as the lab
node runs); without it the file is a symbolic link to ``/dev/null``, which the plugin follows.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from domain.composer_mode import dra_device_name

log = logging.getLogger("lab.gpu_agent")

#: Major and minor number of the device files: those of ``/dev/null`` (Linux ``devices.txt``).
NULL_DEVICE = (1, 3)


def make_device_file(path: Path) -> None:
    """Create ``path`` as a character device 1:3, or a symbolic link to ``/dev/null`` when this
    process may not make device nodes.

    Raises:
        OSError: ``path`` exists, or its directory is missing or not writable.
    """
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(*NULL_DEVICE))
    except PermissionError:
        os.symlink("/dev/null", path)


@dataclass
class DeviceFiles:
    """Keeps ``root/<machine>/<device>`` in step with the Director's attachments.

    Attributes:
        root: the directory holding one directory per machine (created when needed).
    """

    root: Path

    def sync(self, attached: Mapping[str, Sequence[str]]) -> dict[str, tuple[list[str], list[str]]]:
        """Make each machine's directory hold exactly one file per GPU attached to it.

        Args:
            attached: machine name -> Director names of the GPUs attached to it (``GPU_7``).

        Returns:
            machine -> (device files added, device files removed), for machines that changed.

        A Director name that makes no DNS label, or a machine name that is no plain directory
        name, is skipped with a warning; the directories of machines without GPUs are kept, empty.

        Raises:
            OSError: a file could not be made or removed (the next poll tries again).
        """
        changes: dict[str, tuple[list[str], list[str]]] = {}
        present = {p.name for p in self.root.iterdir() if p.is_dir()} if self.root.is_dir() else set()
        for machine in sorted(present | set(attached)):
            if machine in ("", ".", "..") or "/" in machine:
                log.warning("machine %r: no directory name, no device files", machine)
                continue
            want = set()
            for director_name in attached.get(machine, ()):
                name = dra_device_name(director_name)
                if name is None:
                    log.warning("GPU %r on %s makes no DNS label: no device file", director_name, machine)
                else:
                    want.add(name)
            d = self.root / machine
            have = {p.name for p in d.iterdir() if not p.is_dir() or p.is_symlink()} if d.is_dir() else set()
            added, removed = sorted(want - have), sorted(have - want)
            if added:
                d.mkdir(parents=True, exist_ok=True)
            for name in added:
                make_device_file(d / name)
            for name in removed:
                (d / name).unlink()
            if added or removed:
                changes[machine] = (added, removed)
                log.info("device files on %s: +%s -%s", machine, added, removed)
        return changes
