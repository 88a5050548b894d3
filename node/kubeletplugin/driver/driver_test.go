package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"tags.cncf.io/container-device-interface/pkg/cdi"
)

const (
	uidA types.UID = "0b0e8f5c-3c2a-4d7e-9a51-1f2e3d4c5b6a" // starts with a digit, as UIDs may
	uidB types.UID = "c1d2e3f4-0000-4000-8000-000000000002"
)

// fixture is a driver over temporary directories; GPU device files are symbolic links to
// /dev/null (a character device, 1:3, on every Linux), so the tests need no root for mknod.
type fixture struct {
	d                 *Driver
	deviceDir, cdiDir string
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	root := t.TempDir()
	f := fixture{deviceDir: filepath.Join(root, "devices"), cdiDir: filepath.Join(root, "cdi")}
	if err := os.MkdirAll(f.deviceDir, 0o755); err != nil {
		t.Fatal(err)
	}
	f.d = &Driver{DriverName: Name, NodeName: "mgmt-1", DeviceDir: f.deviceDir, CDIDir: f.cdiDir, ContainerDevDir: "/dev"}
	return f
}

func (f fixture) attach(t *testing.T, devices ...string) {
	t.Helper()
	for _, dev := range devices {
		if err := os.Symlink("/dev/null", filepath.Join(f.deviceDir, dev)); err != nil {
			t.Fatal(err)
		}
	}
}

type result struct{ request, driver, device string }

func claim(uid types.UID, name string, results ...result) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", UID: uid}}
	c.Status.Allocation = &resourceapi.AllocationResult{}
	for _, r := range results {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
			resourceapi.DeviceRequestAllocationResult{Request: r.request, Driver: r.driver, Pool: "fabric", Device: r.device})
	}
	return c
}

func (f fixture) prepare(t *testing.T, claims ...*resourceapi.ResourceClaim) map[types.UID]kubeletplugin.PrepareResult {
	t.Helper()
	out, err := f.d.PrepareResourceClaims(context.Background(), claims)
	if err != nil {
		t.Fatalf("overall error: %v", err)
	}
	if len(out) != len(claims) {
		t.Fatalf("want one result per claim, got %d for %d", len(out), len(claims))
	}
	return out
}

func (f fixture) unprepare(t *testing.T, uids ...types.UID) map[types.UID]error {
	t.Helper()
	var objs []kubeletplugin.NamespacedObject
	for _, uid := range uids {
		objs = append(objs, kubeletplugin.NamespacedObject{UID: uid,
			NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "c-" + string(uid)[:4]}})
	}
	out, err := f.d.UnprepareResourceClaims(context.Background(), objs)
	if err != nil {
		t.Fatalf("overall error: %v", err)
	}
	return out
}

func (f fixture) specPath(uid types.UID) string {
	return filepath.Join(f.cdiDir, "gpu.composer.liqid.io-gpu_"+string(uid)+".json")
}

func TestPrepareWritesOneCDIDevicePerGPUAndReturnsTheirIDs(t *testing.T) {
	f := newFixture(t)
	f.attach(t, "gpu-7", "gpu-8")
	c := claim(uidA, "two-gpus",
		result{"gpus", Name, "gpu-7"}, result{"gpus", "other.example.com", "nic-0"}, result{"gpus", Name, "gpu-8"})

	res := f.prepare(t, c)[uidA]

	if res.Err != nil {
		t.Fatal(res.Err)
	}
	want := []kubeletplugin.Device{
		{Requests: []string{"gpus"}, PoolName: "fabric", DeviceName: "gpu-7",
			CDIDeviceIDs: []string{"gpu.composer.liqid.io/gpu=" + string(uidA) + "-gpu-7"}},
		{Requests: []string{"gpus"}, PoolName: "fabric", DeviceName: "gpu-8",
			CDIDeviceIDs: []string{"gpu.composer.liqid.io/gpu=" + string(uidA) + "-gpu-8"}},
	}
	if !reflect.DeepEqual(res.Devices, want) {
		t.Fatalf("devices:\n got %+v\nwant %+v", res.Devices, want)
	}
	spec, err := ReadSpecFile(f.specPath(uidA))
	if err != nil {
		t.Fatal(err)
	}
	if spec.Version != "0.5.0" || spec.Kind != "gpu.composer.liqid.io/gpu" || len(spec.Devices) != 2 {
		t.Fatalf("spec header: version %q kind %q, %d devices", spec.Version, spec.Kind, len(spec.Devices))
	}
	dev := spec.Devices[0]
	if dev.Name != string(uidA)+"-gpu-7" {
		t.Fatalf("device name %q", dev.Name)
	}
	if got := dev.ContainerEdits.Env; !reflect.DeepEqual(got, []string{"NVIDIA_VISIBLE_DEVICES=gpu-7,gpu-8"}) {
		t.Fatalf("env %v", got)
	}
	node := dev.ContainerEdits.DeviceNodes[0]
	if node.Path != "/dev/gpu-7" || node.HostPath != filepath.Join(f.deviceDir, "gpu-7") ||
		node.Type != "c" || node.Major != 1 || node.Minor != 3 {
		t.Fatalf("device node %+v", *node)
	}
}

// The spec is read by the CDI library container runtimes use (containerd 2.x vendors it): it
// loads without errors and injects the device node and the variable into an OCI spec.
func TestTheCDILibraryInjectsThePreparedGPUs(t *testing.T) {
	f := newFixture(t)
	f.attach(t, "gpu-7")
	res := f.prepare(t, claim(uidA, "one", result{"gpu", Name, "gpu-7"}))[uidA]
	if res.Err != nil {
		t.Fatal(res.Err)
	}

	cache, err := cdi.NewCache(cdi.WithSpecDirs(f.cdiDir), cdi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	if errs := cache.GetErrors(); len(errs) > 0 {
		t.Fatalf("CDI cache errors: %v", errs)
	}
	spec := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
	unresolved, err := cache.InjectDevices(spec, res.Devices[0].CDIDeviceIDs...)
	if err != nil || len(unresolved) > 0 {
		t.Fatalf("inject: %v, unresolved %v", err, unresolved)
	}
	if len(spec.Linux.Devices) != 1 {
		t.Fatalf("devices %+v", spec.Linux.Devices)
	}
	got := spec.Linux.Devices[0]
	if got.Path != "/dev/gpu-7" || got.Type != "c" || got.Major != 1 || got.Minor != 3 {
		t.Fatalf("device %+v", got)
	}
	if !reflect.DeepEqual(spec.Process.Env, []string{"NVIDIA_VISIBLE_DEVICES=gpu-7"}) {
		t.Fatalf("env %v", spec.Process.Env)
	}
}

func TestAMissingDeviceFileFailsOnlyThatClaim(t *testing.T) {
	f := newFixture(t)
	f.attach(t, "gpu-8")

	out := f.prepare(t, claim(uidA, "waits", result{"gpu", Name, "gpu-7"}), claim(uidB, "ready", result{"gpu", Name, "gpu-8"}))

	err := out[uidA].Err
	if err == nil {
		t.Fatal("want an error for the missing device file")
	}
	for _, want := range []string{"claim team-a/waits", "gpu-7", filepath.Join(f.deviceDir, "gpu-7"), "mgmt-1", "kubelet retries"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if _, statErr := os.Stat(f.specPath(uidA)); !errors.Is(statErr, os.ErrNotExist) {
		t.Errorf("a spec was written for the failed claim: %v", statErr)
	}
	if out[uidB].Err != nil || len(out[uidB].Devices) != 1 {
		t.Fatalf("the other claim: %+v", out[uidB])
	}
	// The GPU shows up: the kubelet's retry succeeds.
	f.attach(t, "gpu-7")
	if res := f.prepare(t, claim(uidA, "waits", result{"gpu", Name, "gpu-7"}))[uidA]; res.Err != nil {
		t.Fatal(res.Err)
	}
}

func TestADeviceFileThatIsNoDeviceNodeIsRefused(t *testing.T) {
	f := newFixture(t)
	if err := os.WriteFile(filepath.Join(f.deviceDir, "gpu-7"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := f.prepare(t, claim(uidA, "plain-file", result{"gpu", Name, "gpu-7"}))[uidA].Err
	if !errors.Is(err, ErrNotDeviceNode) {
		t.Fatalf("want ErrNotDeviceNode, got %v", err)
	}
}

func TestPreparingTwiceGivesTheSameSpecAndIDs(t *testing.T) {
	f := newFixture(t)
	f.attach(t, "gpu-7")
	c := claim(uidA, "again", result{"gpu", Name, "gpu-7"})
	first := f.prepare(t, c)[uidA]
	before, err := os.ReadFile(f.specPath(uidA))
	if err != nil {
		t.Fatal(err)
	}
	second := f.prepare(t, c)[uidA]
	after, err := os.ReadFile(f.specPath(uidA))
	if err != nil {
		t.Fatal(err)
	}
	if first.Err != nil || second.Err != nil || !reflect.DeepEqual(first, second) || string(before) != string(after) {
		t.Fatalf("not idempotent:\n%+v\n%+v", first, second)
	}
	entries, _ := os.ReadDir(f.cdiDir)
	if len(entries) != 1 {
		t.Fatalf("want one file in the CDI dir (no temporary left), got %v", entries)
	}
}

func TestUnprepareRemovesTheSpecAndToleratesRepeats(t *testing.T) {
	f := newFixture(t)
	f.attach(t, "gpu-7")
	f.prepare(t, claim(uidA, "done", result{"gpu", Name, "gpu-7"}))

	for i := 0; i < 2; i++ { // the kubelet may ask again
		out := f.unprepare(t, uidA, uidB) // uidB was never prepared
		if out[uidA] != nil || out[uidB] != nil || len(out) != 2 {
			t.Fatalf("round %d: %v", i, out)
		}
	}
	if _, err := os.Stat(f.specPath(uidA)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("spec still there: %v", err)
	}
}

func TestAGPUPreparedForAnotherClaimIsRefusedUntilThatOneIsUnprepared(t *testing.T) {
	f := newFixture(t)
	f.attach(t, "gpu-7")
	if res := f.prepare(t, claim(uidA, "first", result{"gpu", Name, "gpu-7"}))[uidA]; res.Err != nil {
		t.Fatal(res.Err)
	}

	err := f.prepare(t, claim(uidB, "second", result{"gpu", Name, "gpu-7"}))[uidB].Err
	if err == nil || !strings.Contains(err.Error(), "prepared for claim UID "+string(uidA)) {
		t.Fatalf("want a clash naming the first claim, got %v", err)
	}
	f.unprepare(t, uidA)
	if res := f.prepare(t, claim(uidB, "second", result{"gpu", Name, "gpu-7"}))[uidB]; res.Err != nil {
		t.Fatal(res.Err)
	}
}

func TestAClaimWithoutAllocationOrWithoutOurDevices(t *testing.T) {
	f := newFixture(t)
	unallocated := claim(uidA, "pending")
	unallocated.Status.Allocation = nil
	out := f.prepare(t, unallocated, claim(uidB, "foreign", result{"nic", "other.example.com", "nic-0"}))
	if out[uidA].Err == nil || !strings.Contains(out[uidA].Err.Error(), "not allocated") {
		t.Fatalf("unallocated: %v", out[uidA].Err)
	}
	if out[uidB].Err != nil || len(out[uidB].Devices) != 0 {
		t.Fatalf("foreign: %+v", out[uidB])
	}
	if _, err := os.Stat(f.specPath(uidB)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("spec written for a claim without our devices: %v", err)
	}
}

func TestVisibleDevicesListsTheGPUsOfTheSameRequest(t *testing.T) {
	gpus := []GPU{
		{Request: "train", Device: "gpu-1", HostPath: "/d/gpu-1", Type: "c", Major: 195, Minor: 0},
		{Request: "infer", Device: "gpu-2", HostPath: "/d/gpu-2", Type: "c", Major: 195, Minor: 1},
		{Request: "train", Device: "gpu-3", HostPath: "/d/gpu-3", Type: "c", Major: 195, Minor: 2},
	}
	spec, err := BuildSpec(Name, uidB, gpus, "/dev")
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, d := range spec.Devices {
		env = append(env, d.ContainerEdits.Env...)
	}
	want := []string{"NVIDIA_VISIBLE_DEVICES=gpu-1,gpu-3", "NVIDIA_VISIBLE_DEVICES=gpu-2", "NVIDIA_VISIBLE_DEVICES=gpu-1,gpu-3"}
	if !reflect.DeepEqual(env, want) {
		t.Fatalf("env %v", env)
	}
}

func TestHandleErrorEndsTheProcessOnlyOnFatalErrors(t *testing.T) {
	var cancelled []error
	d := &Driver{Cancel: func(err error) { cancelled = append(cancelled, err) }}
	d.HandleError(context.Background(), fmt.Errorf("slow API: %w", kubeletplugin.ErrRecoverable), "recoverable")
	if len(cancelled) != 0 {
		t.Fatalf("cancelled on a recoverable error: %v", cancelled)
	}
	d.HandleError(context.Background(), errors.New("socket gone"), "DRA gRPC server failed")
	if len(cancelled) != 1 || !strings.Contains(cancelled[0].Error(), "DRA gRPC server failed: socket gone") {
		t.Fatalf("cancel calls: %v", cancelled)
	}
}
