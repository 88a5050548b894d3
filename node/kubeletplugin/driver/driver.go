// Package driver is the node side of the composer's DRA driver gpu.composer.liqid.io: the
// kubeletplugin.DRAPlugin that prepares a claim's composed GPUs for its containers.
//
// The composer (Python, composer/dra) publishes the ResourceSlices centrally and attaches the
// allocated GPU to the node; this plugin only finds each allocated GPU's device file on the node
// and describes it in a CDI spec the container runtime reads (docs/dra.md "Node side: the kubelet
// plugin"). It keeps no state besides the spec files: a restarted plugin, or another instance,
// sees what is prepared in the CDI directory.
package driver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
)

// Name is the DRA driver name (domain/composer_mode.py DRA_DRIVER).
const Name = "gpu.composer.liqid.io"

// Driver implements kubeletplugin.DRAPlugin.
type Driver struct {
	// DriverName is the DRA driver whose allocated devices are ours (Name).
	DriverName string
	// NodeName is this node (named in error messages).
	NodeName string
	// DeviceDir holds one device file per GPU attached to this node, named like its DRA device
	// (on a real host the NVIDIA driver's /dev/nvidiaN would need a mapping, not built).
	DeviceDir string
	// CDIDir is where the claims' CDI specs are written (a directory the runtime reads).
	CDIDir string
	// ContainerDevDir is where a GPU's device file appears in the container ("/dev").
	ContainerDevDir string
	// Cancel, if set, is called with a fatal background error (HandleError); the caller's main
	// context ends and the process stops.
	Cancel func(error)
}

var _ kubeletplugin.DRAPlugin = (*Driver)(nil)

// PrepareResourceClaims writes each claim's CDI spec and returns its CDI device IDs (one per
// GPU). A claim whose GPU has no device file here, one used by another prepared claim, or a
// spec that cannot be written gets a per-claim error; the kubelet retries it. Idempotent: a claim
// prepared again gets the same spec and IDs.
func (d *Driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	logger := klog.FromContext(ctx)
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		res := d.prepare(claim)
		if res.Err != nil {
			logger.Error(res.Err, "prepare failed", "claim", klog.KObj(claim))
		} else {
			logger.Info("prepared", "claim", klog.KObj(claim), "devices", len(res.Devices))
		}
		out[claim.UID] = res
	}
	return out, nil
}

func (d *Driver) prepare(claim *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
	where := fmt.Sprintf("claim %s/%s", claim.Namespace, claim.Name)
	if claim.Status.Allocation == nil {
		return kubeletplugin.PrepareResult{Err: fmt.Errorf("%s is not allocated", where)}
	}
	var gpus []GPU
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != d.DriverName {
			continue
		}
		g, err := d.find(r)
		if err != nil {
			return kubeletplugin.PrepareResult{Err: fmt.Errorf("%s: %w", where, err)}
		}
		gpus = append(gpus, g)
	}
	if len(gpus) == 0 {
		return kubeletplugin.PrepareResult{Devices: []kubeletplugin.Device{}}
	}
	if err := d.checkNotInUse(claim.UID, gpus); err != nil {
		return kubeletplugin.PrepareResult{Err: fmt.Errorf("%s: %w", where, err)}
	}
	spec, err := BuildSpec(d.DriverName, claim.UID, gpus, d.ContainerDevDir)
	if err != nil {
		return kubeletplugin.PrepareResult{Err: fmt.Errorf("%s: %w", where, err)}
	}
	if err := WriteSpecFile(d.CDIDir, SpecFileName(d.DriverName, claim.UID), spec); err != nil {
		return kubeletplugin.PrepareResult{Err: fmt.Errorf("%s: write CDI spec: %w", where, err)}
	}
	devices := make([]kubeletplugin.Device, 0, len(gpus))
	for _, g := range gpus {
		devices = append(devices, kubeletplugin.Device{
			Requests:     []string{g.Request},
			PoolName:     g.Pool,
			DeviceName:   g.Device,
			CDIDeviceIDs: []string{CDIDeviceID(d.DriverName, claim.UID, g.Device)},
		})
	}
	return kubeletplugin.PrepareResult{Devices: devices}
}

// find locates an allocated device's file under DeviceDir.
func (d *Driver) find(r resourceapi.DeviceRequestAllocationResult) (GPU, error) {
	path := filepath.Join(d.DeviceDir, r.Device)
	if r.Device == "" || filepath.Base(r.Device) != r.Device {
		return GPU{}, fmt.Errorf("device name %q is no file name", r.Device)
	}
	kind, major, minor, err := DeviceNumbers(path)
	if errors.Is(err, fs.ErrNotExist) {
		return GPU{}, fmt.Errorf("GPU %s (pool %s) has no device file %s on node %s: "+
			"it is not attached to this node or the node does not see it yet (the kubelet retries)",
			r.Device, r.Pool, path, d.NodeName)
	}
	if err != nil {
		return GPU{}, fmt.Errorf("GPU %s (pool %s): %w", r.Device, r.Pool, err)
	}
	return GPU{Request: r.Request, Pool: r.Pool, Device: r.Device, HostPath: path,
		Type: kind, Major: major, Minor: minor}, nil
}

// checkNotInUse refuses GPUs whose device file another claim's spec in CDIDir names: the
// scheduler should never allocate a device twice, and this driver is the last check before a
// second workload would share it.
func (d *Driver) checkNotInUse(uid types.UID, gpus []GPU) error {
	prefix := d.DriverName + "-" + CDIClass + "_"
	mine := SpecFileName(d.DriverName, uid)
	entries, err := os.ReadDir(d.CDIDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read CDI directory: %w", err)
	}
	held := map[string]string{} // host path -> other claim's UID
	for _, e := range entries {
		name := e.Name()
		if name == mine || !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, ".json") {
			continue
		}
		spec, err := ReadSpecFile(filepath.Join(d.CDIDir, name))
		if err != nil {
			return fmt.Errorf("read CDI spec of another claim: %w", err)
		}
		other := strings.TrimSuffix(strings.TrimPrefix(name, prefix), ".json")
		for _, dev := range spec.Devices {
			for _, n := range dev.ContainerEdits.DeviceNodes {
				held[n.HostPath] = other
			}
		}
	}
	var clashes []string
	for _, g := range gpus {
		if other, ok := held[g.HostPath]; ok {
			clashes = append(clashes, fmt.Sprintf("GPU %s is prepared for claim UID %s (%s)",
				g.Device, other, filepath.Join(d.CDIDir, prefix+other+".json")))
		}
	}
	sort.Strings(clashes)
	if len(clashes) > 0 {
		return fmt.Errorf("%s; not preparing it for a second claim", strings.Join(clashes, "; "))
	}
	return nil
}

// UnprepareResourceClaims removes each claim's CDI spec. A claim with no spec (never prepared,
// or unprepared before) is not an error.
func (d *Driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	logger := klog.FromContext(ctx)
	out := make(map[types.UID]error, len(claims))
	for _, c := range claims {
		path := filepath.Join(d.CDIDir, SpecFileName(d.DriverName, c.UID))
		err := os.Remove(path)
		if errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
		if err != nil {
			err = fmt.Errorf("claim %s: remove CDI spec: %w", c.NamespacedName, err)
			logger.Error(err, "unprepare failed")
		} else {
			logger.Info("unprepared", "claim", c.NamespacedName)
		}
		out[c.UID] = err
	}
	return out, nil
}

// HandleError logs a background error of the helper (its gRPC servers; this plugin publishes no
// ResourceSlices) and ends the process through Cancel when the error is not recoverable.
func (d *Driver) HandleError(ctx context.Context, err error, msg string) {
	runtime.HandleErrorWithContext(ctx, err, msg)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) && d.Cancel != nil {
		d.Cancel(fmt.Errorf("%s: %w", msg, err))
	}
}
