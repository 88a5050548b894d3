package driver

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"
	cdiparser "tags.cncf.io/container-device-interface/pkg/parser"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// CDIClass is the class part of the CDI kind "<driver name>/gpu".
//
// CDI names (tags.cncf.io/container-device-interface v1.1.2 SPEC.md "Kind" and
// pkg/parser/parser.go): the kind is "<vendor>/<class>", the vendor a DNS subdomain, so the DRA
// driver name gpu.composer.liqid.io (a domain the project owns) keeps the devices apart from
// any other vendor's; the class has no dot (a dot there needs spec 0.6.0); a device name is
// letters, digits, '-', '_', '.', ':' starting and ending with a letter or digit.
const CDIClass = "gpu"

// VisibleDevicesEnv is the variable naming a container's GPUs, as the NVIDIA container
// runtime reads it.
const VisibleDevicesEnv = "NVIDIA_VISIBLE_DEVICES"

// GPU is one of our DRA devices of a claim, found on this node.
type GPU struct {
	// Request is the claim's request (or "request/subrequest") the device was allocated for.
	Request string
	// Pool and Device name the DRA device (Device: a DNS label, e.g. "gpu-7").
	Pool, Device string
	// HostPath is the device file on this node (<device dir>/<Device>).
	HostPath string
	// Type is "c" or "b"; Major and Minor the device numbers of HostPath.
	Type         string
	Major, Minor int64
}

// Kind is the CDI kind of the specs this driver writes: "<driverName>/gpu".
func Kind(driverName string) string { return driverName + "/" + CDIClass }

// CDIDeviceName is the CDI device name of a GPU in one claim: "<claim UID>-<device>". The claim
// UID keeps it unique across claims, as the kubeletplugin package asks (container runtimes may
// cache specs, so a name is not reused for another claim).
func CDIDeviceName(claimUID types.UID, device string) string {
	return string(claimUID) + "-" + device
}

// CDIDeviceID is the fully qualified CDI device ID "<kind>=<device name>" the kubelet passes to
// the container runtime.
func CDIDeviceID(driverName string, claimUID types.UID, device string) string {
	return Kind(driverName) + "=" + CDIDeviceName(claimUID, device)
}

// SpecFileName is the claim's spec file: "<vendor>-<class>_<claim UID>.json", the name
// pkg/cdi GenerateTransientSpecName gives a spec whose life is tied to one entity (CDI v1.1.2
// pkg/cdi/spec.go); runtimes read only ".json" and ".yaml" files of a spec directory
// (pkg/cdi/spec-dirs.go).
func SpecFileName(driverName string, claimUID types.UID) string {
	return driverName + "-" + CDIClass + "_" + string(claimUID) + ".json"
}

// BuildSpec is the claim's CDI spec: one CDI device per GPU with a deviceNodes entry for its
// device file (in the container at <containerDevDir>/<device>, the numbers given so the runtime
// needs no second look) and NVIDIA_VISIBLE_DEVICES naming every GPU of the same request (a
// container gets the GPUs of the requests it uses; device edits' env are appended in order, so
// equal values per request keep the full list whichever device comes last).
//
// The version is the lowest the spec needs (specs-go MinimumRequiredVersion: 0.5.0 for
// deviceNodes.hostPath), which containerd 1.7.2 (CDI v0.5.4, spec 0.5.0) and 2.x accept.
//
// Errors: a CDI device name the CDI rules refuse.
func BuildSpec(driverName string, claimUID types.UID, gpus []GPU, containerDevDir string) (*cdispec.Spec, error) {
	perRequest := map[string][]string{}
	for _, g := range gpus {
		perRequest[g.Request] = append(perRequest[g.Request], g.Device)
	}
	spec := &cdispec.Spec{Kind: Kind(driverName), Devices: []cdispec.Device{}}
	for _, g := range gpus {
		name := CDIDeviceName(claimUID, g.Device)
		if err := cdiparser.ValidateDeviceName(name); err != nil {
			return nil, fmt.Errorf("CDI device name for %s: %w", g.Device, err)
		}
		spec.Devices = append(spec.Devices, cdispec.Device{
			Name: name,
			ContainerEdits: cdispec.ContainerEdits{
				Env: []string{VisibleDevicesEnv + "=" + strings.Join(perRequest[g.Request], ",")},
				DeviceNodes: []*cdispec.DeviceNode{{
					Path:     filepath.Join(containerDevDir, g.Device),
					HostPath: g.HostPath,
					Type:     g.Type,
					Major:    g.Major,
					Minor:    g.Minor,
				}},
			},
		})
	}
	if err := cdiparser.ValidateVendorName(driverName); err != nil {
		return nil, err
	}
	version, err := cdispec.MinimumRequiredVersion(spec)
	if err != nil {
		return nil, err
	}
	spec.Version = version
	return spec, nil
}

// ErrNotDeviceNode is returned for a device file that is no character or block device: a CDI
// deviceNodes entry needs one (the runtime creates the node in the container from its numbers).
var ErrNotDeviceNode = errors.New("not a character or block device")

// DeviceNumbers reads the type ("c" or "b") and major/minor numbers of the device file at path,
// following symbolic links.
//
// Errors: the file's stat error (fs.ErrNotExist when missing), or ErrNotDeviceNode.
func DeviceNumbers(path string) (kind string, major, minor int64, err error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return "", 0, 0, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR:
		kind = "c"
	case unix.S_IFBLK:
		kind = "b"
	default:
		return "", 0, 0, fmt.Errorf("%s: %w", path, ErrNotDeviceNode)
	}
	dev := uint64(st.Rdev) //nolint:unconvert // Rdev is uint32 on some architectures
	return kind, int64(unix.Major(dev)), int64(unix.Minor(dev)), nil
}

// WriteSpecFile writes spec as JSON to dir/name atomically (a hidden temporary file the CDI
// cache ignores, then a rename), creating dir (0755) when missing.
func WriteSpecFile(dir, name string, spec *cdispec.Spec) error {
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+name+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename it is gone already
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, name))
}

// ReadSpecFile reads a CDI spec written by WriteSpecFile.
func ReadSpecFile(path string) (*cdispec.Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var spec cdispec.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &spec, nil
}
