// Command composer-kubelet-plugin is the kubelet plugin of the composer's DRA driver
// gpu.composer.liqid.io (docs/dra.md "Node side: the kubelet plugin").
//
// It registers with the kubelet through its plugin registry directory, serves the DRA gRPC API
// in its plugin data directory, and for each claim the kubelet prepares writes a CDI spec for the
// claim's GPUs (found in --device-dir) into --cdi-dir. It publishes no ResourceSlices: the
// composer does, for the whole fabric. It runs until SIGINT or SIGTERM.
//
// Built on k8s.io/dynamic-resource-allocation v0.36.3 kubeletplugin (go.mod pins it).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	"composable-gpu.local/node/kubeletplugin/driver"
)

type config struct {
	nodeName, kubeconfig, registrarDir, pluginDataDir, deviceDir, cdiDir, containerDevDir string
}

func parseFlags(args []string) (config, error) {
	fs := flag.NewFlagSet("composer-kubelet-plugin", flag.ContinueOnError)
	klog.InitFlags(fs)
	var c config
	fs.StringVar(&c.nodeName, "node-name", os.Getenv("NODE_NAME"), "this node's name (default $NODE_NAME)")
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig to read ResourceClaims with (empty: in-cluster)")
	fs.StringVar(&c.registrarDir, "kubelet-registrar-dir", kubeletplugin.KubeletRegistryDir,
		"the kubelet's plugin registry directory (<kubelet root dir>/plugins_registry)")
	fs.StringVar(&c.pluginDataDir, "plugin-data-dir", filepath.Join(kubeletplugin.KubeletPluginsDir, driver.Name),
		"directory of the plugin's DRA socket, created when missing (<kubelet root dir>/plugins/"+driver.Name+")")
	fs.StringVar(&c.deviceDir, "device-dir", "", "directory with one device file per GPU attached to this node, named like its DRA device")
	fs.StringVar(&c.cdiDir, "cdi-dir", "/var/run/cdi", "directory for the claims' CDI specs (one the container runtime reads)")
	fs.StringVar(&c.containerDevDir, "container-device-dir", "/dev", "where a GPU's device file appears in the container")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.nodeName == "" {
		return c, errors.New("--node-name (or $NODE_NAME) is required")
	}
	if c.deviceDir == "" {
		return c, errors.New("--device-dir is required")
	}
	return c, nil
}

func run(ctx context.Context, c config) error {
	restConfig, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	helper, err := start(ctx, c, client, cancel)
	if err != nil {
		return err
	}
	klog.FromContext(ctx).Info("running", "driver", driver.Name, "node", c.nodeName,
		"deviceDir", c.deviceDir, "cdiDir", c.cdiDir, "registrarDir", c.registrarDir, "pluginDataDir", c.pluginDataDir)
	<-ctx.Done()
	helper.Stop()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}

// start starts the helper with the plugin's driver; cancel ends ctx on a fatal background error.
func start(ctx context.Context, c config, client kubernetes.Interface, cancel func(error)) (*kubeletplugin.Helper, error) {
	// The helper listens in both directories and creates neither (kubeletplugin endpoint.go);
	// the kubelet creates its registry directory too, whichever starts first.
	for _, dir := range []string{c.registrarDir, c.pluginDataDir} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, err
		}
	}
	d := &driver.Driver{
		DriverName:      driver.Name,
		NodeName:        c.nodeName,
		DeviceDir:       c.deviceDir,
		CDIDir:          c.cdiDir,
		ContainerDevDir: c.containerDevDir,
		Cancel:          cancel,
	}
	// No PublishResources call: the helper then manages no ResourceSlices (kubeletplugin
	// draplugin.go, PublishResources), and NodeName only names this node.
	helper, err := kubeletplugin.Start(ctx, d,
		kubeletplugin.DriverName(driver.Name),
		kubeletplugin.NodeName(c.nodeName),
		kubeletplugin.KubeClient(client),
		kubeletplugin.RegistrarDirectoryPath(c.registrarDir),
		kubeletplugin.PluginDataDirectoryPath(c.pluginDataDir),
	)
	if err != nil {
		return nil, fmt.Errorf("start kubelet plugin: %w", err)
	}
	return helper, nil
}

func main() {
	c, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "composer-kubelet-plugin:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		klog.ErrorS(err, "composer-kubelet-plugin failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}
