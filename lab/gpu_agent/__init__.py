"""Lab stand-in for the NVIDIA GPU Operator (device plugin + GPU Feature Discovery).

Not product code: kwok plays the kubelets of the lab's bare-metal workers, so nothing on a lab
node would notice a hot-plugged GPU. This agent plays the GPU Operator's part instead: it polls
the Director (or its simulator) for each machine's attached GPUs and, after a configurable
delay, reflects them into the Node named like the machine:

- ``status.capacity`` / ``status.allocatable`` ``nvidia.com/gpu`` (what the device plugin
  advertises);
- the GFD labels ``nvidia.com/gpu.product`` (sanitised product name, e.g. ``Tesla-T4``),
  ``nvidia.com/gpu.count`` and ``nvidia.com/gpu.present``;

and removes them when the GPUs are detached. With ``--plugin-configs FILE`` (device-plugin config
name -> config, as the GPU Operator's ``devicePlugin.config.data``) it advertises per sharing mode
as NVIDIA's device plugin, GFD and mig-manager do (:mod:`lab.gpu_agent.nvidia`, each rule with its
NVIDIA source): the config a node's ``nvidia.com/device-plugin.config`` label names decides
time-slicing or MPS (``nvidia.com/gpu`` or, renamed, ``nvidia.com/gpu.shared`` = GPUs x replicas,
product ``<name>-SHARED`` unless renamed, ``nvidia.com/gpu.replicas``,
``nvidia.com/gpu.sharing-strategy``, ``nvidia.com/mps.capable``) and the MIG strategy (``single``:
MIG devices as ``nvidia.com/gpu``, product ``<name>-MIG-<profile>``; ``mixed``:
``nvidia.com/mig-<profile>``); ``--mig-layouts`` gives the MIG devices per GPU of each mig-parted
config, and a node's ``nvidia.com/mig.config`` label starts a mig-parted run
(``nvidia.com/mig.config.state`` ``pending`` for ``--mig-apply-delay`` seconds, then ``success``).
Like mig-manager it runs again only when that label changes or the node's mig-manager pod
starts (a fake pod ``nvidia-mig-manager-<node>``, label ``app=nvidia-mig-manager``, in the
plugin namespace, recreated when deleted), so a GPU hot-plugged later stays whole until that pod
is restarted (the composer restarts it on a MIG host). With ``--dra`` the node's GPUs reach pods through
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
