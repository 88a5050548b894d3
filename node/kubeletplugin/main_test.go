package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
)

func TestFlags(t *testing.T) {
	c, err := parseFlags([]string{"--node-name=mgmt-1", "--device-dir=/run/gpus/mgmt-1"})
	if err != nil {
		t.Fatal(err)
	}
	if c.cdiDir != "/var/run/cdi" || c.registrarDir != "/var/lib/kubelet/plugins_registry" ||
		c.pluginDataDir != "/var/lib/kubelet/plugins/gpu.composer.liqid.io" || c.containerDevDir != "/dev" {
		t.Fatalf("defaults: %+v", c)
	}
	t.Setenv("NODE_NAME", "")
	for args, want := range map[string]string{
		"--device-dir=/d": "--node-name",
		"--node-name=n":   "--device-dir",
	} {
		if _, err := parseFlags([]string{args}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: want an error naming %s, got %v", args, want, err)
		}
	}
}

// What the kubelet does, over the plugin's sockets: the helper registers, reads the claim from
// the API server, and answers NodePrepareResources with the driver's CDI device IDs; the plugin
// writes no ResourceSlice.
func TestThePluginAnswersTheKubeletOverGRPC(t *testing.T) {
	root, err := os.MkdirTemp("", "kp") // short: a Unix socket path has at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	c := config{nodeName: "mgmt-1", registrarDir: filepath.Join(root, "registry"),
		pluginDataDir: filepath.Join(root, "plugins", "gpu.composer.liqid.io"), deviceDir: filepath.Join(root, "gpus"),
		cdiDir: filepath.Join(root, "cdi"), containerDevDir: "/dev"}
	if err := os.MkdirAll(c.deviceDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/null", filepath.Join(c.deviceDir, "gpu-7")); err != nil {
		t.Fatal(err)
	}
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train", UID: "4f0c2a9e-1111-4222-8333-944455556666"}}
	claim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
		Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: "gpu.composer.liqid.io", Pool: "fabric", Device: "gpu-7"}},
	}}
	client := fake.NewClientset(claim)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)

	helper, err := start(ctx, c, client, cancel)
	if err != nil {
		t.Fatal(err)
	}
	defer helper.Stop()

	if _, err := os.Stat(filepath.Join(c.registrarDir, "gpu.composer.liqid.io-reg.sock")); err != nil {
		t.Fatalf("registration socket: %v", err)
	}
	conn, err := grpc.NewClient("unix://"+filepath.Join(c.pluginDataDir, "dra.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dra := drapbv1.NewDRAPluginClient(conn)
	ref := &drapbv1.Claim{Namespace: "team-a", Name: "train", Uid: string(claim.UID)}
	resp, err := dra.NodePrepareResources(ctx, &drapbv1.NodePrepareResourcesRequest{Claims: []*drapbv1.Claim{ref}})
	if err != nil {
		t.Fatal(err)
	}
	got := resp.Claims[string(claim.UID)]
	if got == nil || got.Error != "" || len(got.Devices) != 1 {
		t.Fatalf("prepare response %v", resp)
	}
	want := "gpu.composer.liqid.io/gpu=" + string(claim.UID) + "-gpu-7"
	if d := got.Devices[0]; d.DeviceName != "gpu-7" || d.PoolName != "fabric" || len(d.CdiDeviceIds) != 1 || d.CdiDeviceIds[0] != want {
		t.Fatalf("device %v", d)
	}
	spec := filepath.Join(c.cdiDir, "gpu.composer.liqid.io-gpu_"+string(claim.UID)+".json")
	if _, err := os.Stat(spec); err != nil {
		t.Fatal(err)
	}

	un, err := dra.NodeUnprepareResources(ctx, &drapbv1.NodeUnprepareResourcesRequest{Claims: []*drapbv1.Claim{ref}})
	if err != nil || un.Claims[string(claim.UID)].GetError() != "" {
		t.Fatalf("unprepare: %v %v", err, un)
	}
	if _, err := os.Stat(spec); !os.IsNotExist(err) {
		t.Fatalf("spec left after unprepare: %v", err)
	}
	for _, a := range client.Actions() {
		if a.GetResource().Resource != "resourceclaims" || a.GetVerb() != "get" {
			t.Errorf("unexpected API call %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
	if err := context.Cause(ctx); err != nil {
		t.Fatalf("the plugin cancelled itself: %v", err)
	}
}
