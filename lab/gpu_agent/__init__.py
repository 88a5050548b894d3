"""Lab stand-in for the NVIDIA GPU Operator (device plugin + GPU Feature Discovery).

Not product code: kwok plays the kubelets of the lab's bare-metal workers, so nothing on a lab
node would notice a hot-plugged GPU. This agent plays the GPU Operator's part instead: it polls
the Director (or its simulator) for each machine's attached GPUs and, after a configurable
delay, reflects them into the Node named like the machine:

- ``status.capacity`` / ``status.allocatable`` ``nvidia.com/gpu`` (what the device plugin
  advertises), optionally ``nvidia.com/gpu.shared`` for time-slicing with ``renameByDefault``;
- the GFD labels ``nvidia.com/gpu.product`` (sanitised product name, e.g. ``Tesla-T4``),
  ``nvidia.com/gpu.count`` and ``nvidia.com/gpu.present``;

and removes them when the GPUs are detached. With ``--dra`` the node's GPUs reach pods through
DRA (where NVIDIA's DRA driver replaces the device plugin): only GFD's labels are written, no
``nvidia.com/gpu`` capacity. With ``--plugin-restart-quirk`` it also reproduces
a known behaviour of the real device plugin: hot-plugged GPUs are not advertised until the
node's device-plugin pod restarts. It then keeps one fake device-plugin pod per node
(namespace ``gpu-operator``, label ``app=nvidia-device-plugin-daemonset``, recreated when
deleted, like its DaemonSet would) and advertises more GPUs only after that pod was recreated.

With ``--device-dir DIR`` it also plays the NVIDIA driver's part for DRA mode: it keeps a device
file per attached GPU in ``DIR/<machine>/``, named like the GPU's DRA device, where the DRA
kubelet plugin (``node/kubeletplugin``) finds it (:mod:`lab.gpu_agent.device_files`).

It talks to the Director's REST API directly (``GET device/info/gpu``, ``GET predevice``);
like every lab stand-in it imports nothing from ``composer/`` or ``dynamic_providers/``.
Run it with ``python -m lab.gpu_agent`` (see ``--help``).
"""
