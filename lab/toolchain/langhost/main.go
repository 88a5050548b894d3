// Command pulumi-language-python is this project's Python language host for the Pulumi
// engine: the engine starts it, performs the LanguageRuntime handshake over gRPC and asks
// it to run the Pulumi program (`Run`) or a Python plugin such as a policy pack
// (`RunPlugin`).
//
// Why it exists: upstream's host lives in its own Go module
// (github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3) that this machine's
// Go module proxy refuses (403 for every version), while the engine (pkg/v3) and the SDK
// (sdk/v3, which ships the `pulumi-language-python-exec` runner script) are served. This
// host implements the part of the LanguageRuntime protocol (sdk/v3 proto/pulumi/language.proto)
// that `pulumi preview/up/destroy/refresh` and `--policy-pack` use:
//
//   - Handshake, GetPluginInfo, About, GetProgramDependencies (pip list);
//   - GetRequiredPlugins / GetRequiredPackages: none; provider plugins are found on $PATH
//     (the engine's "ambient plugins"), which the project's toolchain puts there;
//   - Run: executes `<venv>/bin/python -u pulumi-language-python-exec ...` with the same
//     arguments and PULUMI_CONFIG / PULUMI_CONFIG_SECRET_KEYS environment the upstream
//     host passes; exit code 32 means the program already reported its error (bail);
//   - RunPlugin: runs a Python plugin directory (a policy pack's `__main__.py`) with the
//     plugin's virtualenv, streaming its stdout/stderr and exit code back to the engine;
//   - InstallDependencies: reports that dependencies are installed by `make setup`.
//
// The virtualenv comes from the `virtualenv` runtime option of Pulumi.yaml or
// PulumiPolicy.yaml, relative to the project root, as upstream documents.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// version is stamped at build time with -X main.version=vX.Y.Z (the engine release).
var version = "v0.0.0-dev"

// bailExitCode is what pulumi-language-python-exec exits with after it has already shown
// the user an actionable error (see that script).
const bailExitCode = 32

type host struct {
	pulumirpc.UnimplementedLanguageRuntimeServer

	execScript string // path of pulumi-language-python-exec

	mu            sync.Mutex
	engineAddress string
	rootDirectory string
	children      map[*exec.Cmd]struct{}
}

// track records a started child process until it is waited for.
func (h *host) track(cmd *exec.Cmd, running bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.children == nil {
		h.children = map[*exec.Cmd]struct{}{}
	}
	if running {
		h.children[cmd] = struct{}{}
	} else {
		delete(h.children, cmd)
	}
}

func (h *host) killChildren() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for cmd := range h.children {
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
		}
	}
}

func main() {
	engineAddress := ""
	// The engine passes its own address as the last positional argument and may pass
	// flags (-tracing, -root, ...) that this host does not need; ignore those.
	for _, a := range os.Args[1:] {
		if !strings.HasPrefix(a, "-") {
			engineAddress = a
		}
	}
	self, err := os.Executable()
	if err != nil {
		fatal(fmt.Errorf("locating own executable: %w", err))
	}
	execScript := filepath.Join(filepath.Dir(self), "pulumi-language-python-exec")
	if _, err := os.Stat(execScript); err != nil {
		fatal(fmt.Errorf("missing runner %s (run `make setup`): %w", execScript, err))
	}
	h := &host{execScript: execScript, engineAddress: engineAddress}

	handle, err := rpcutil.ServeWithOptions(rpcutil.ServeOptions{
		Init: func(srv *grpc.Server) error {
			pulumirpc.RegisterLanguageRuntimeServer(srv, h)
			return nil
		},
	})
	if err != nil {
		fatal(fmt.Errorf("starting language host gRPC server: %w", err))
	}
	// The engine stops plugins with SIGINT and waits up to 5 s before killing them: exit
	// promptly, taking any running program or plugin process with us.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		h.killChildren()
		os.Exit(0)
	}()
	// The engine reads the port from the first line of stdout.
	fmt.Printf("%d\n", handle.Port)
	if err := <-handle.Done; err != nil {
		fatal(fmt.Errorf("language host gRPC server stopped: %w", err))
	}
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "pulumi-language-python: %v\n", err)
	os.Exit(1)
}

// Handshake records the engine address and the project root.
func (h *host) Handshake(_ context.Context, req *pulumirpc.LanguageHandshakeRequest) (*pulumirpc.LanguageHandshakeResponse, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.engineAddress = req.GetEngineAddress()
	if req.RootDirectory != nil {
		h.rootDirectory = req.GetRootDirectory()
	}
	return &pulumirpc.LanguageHandshakeResponse{}, nil
}

func (h *host) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: strings.TrimPrefix(version, "v")}, nil
}

// GetRequiredPlugins returns none: plugins are resolved from $PATH by the engine.
func (h *host) GetRequiredPlugins(context.Context, *pulumirpc.GetRequiredPluginsRequest) (*pulumirpc.GetRequiredPluginsResponse, error) {
	return &pulumirpc.GetRequiredPluginsResponse{}, nil
}

// GetRequiredPackages returns none: plugins are resolved from $PATH by the engine.
func (h *host) GetRequiredPackages(context.Context, *pulumirpc.GetRequiredPackagesRequest) (*pulumirpc.GetRequiredPackagesResponse, error) {
	return &pulumirpc.GetRequiredPackagesResponse{}, nil
}

// InstallDependencies is a no-op: `make setup` owns the virtualenv.
func (h *host) InstallDependencies(req *pulumirpc.InstallDependenciesRequest, srv pulumirpc.LanguageRuntime_InstallDependenciesServer) error {
	py := pythonFor(req.GetInfo(), h.root(req.GetInfo()))
	msg := fmt.Sprintf("dependencies are installed by `make setup` (python: %s)\n", py)
	return srv.Send(&pulumirpc.InstallDependenciesResponse{Stdout: []byte(msg)})
}

func (h *host) About(_ context.Context, req *pulumirpc.AboutRequest) (*pulumirpc.AboutResponse, error) {
	py := pythonFor(req.GetInfo(), h.root(req.GetInfo()))
	out, err := exec.Command(py, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("running %s --version: %w", py, err)
	}
	return &pulumirpc.AboutResponse{
		Executable: py,
		Version:    strings.TrimSpace(strings.TrimPrefix(string(out), "Python ")),
	}, nil
}

// GetProgramDependencies lists the virtualenv's packages (`pip list --format json`).
func (h *host) GetProgramDependencies(_ context.Context, req *pulumirpc.GetProgramDependenciesRequest) (*pulumirpc.GetProgramDependenciesResponse, error) {
	py := pythonFor(req.GetInfo(), h.root(req.GetInfo()))
	out, err := exec.Command(py, "-m", "pip", "list", "--format", "json", "--disable-pip-version-check").Output()
	if err != nil {
		return nil, fmt.Errorf("listing packages with %s -m pip list: %w", py, err)
	}
	var pkgs []struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	if err := json.Unmarshal(out, &pkgs); err != nil {
		return nil, fmt.Errorf("parsing pip list output: %w", err)
	}
	resp := &pulumirpc.GetProgramDependenciesResponse{}
	for _, p := range pkgs {
		resp.Dependencies = append(resp.Dependencies, &pulumirpc.DependencyInfo{Name: p.Name, Version: p.Version})
	}
	return resp, nil
}

// Run executes the Pulumi program through pulumi-language-python-exec.
func (h *host) Run(ctx context.Context, req *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	root := h.root(req.GetInfo())
	py := pythonFor(req.GetInfo(), root)

	args := []string{"-u", h.execScript}
	add := func(k, v string) {
		if v != "" {
			args = append(args, "--"+k, v)
		}
	}
	add("monitor", req.GetMonitorAddress())
	add("engine", h.engine())
	add("project", req.GetProject())
	add("stack", req.GetStack())
	add("pwd", req.GetPwd())
	add("dry_run", fmt.Sprintf("%v", req.GetDryRun()))
	add("parallel", fmt.Sprint(req.GetParallel()))
	add("organization", req.GetOrganization())
	add("root_directory", root)
	program := req.GetProgram()
	if info := req.GetInfo(); info != nil && info.GetProgramDirectory() != "" {
		program = filepath.Join(info.GetProgramDirectory(), info.GetEntryPoint())
	}
	if program == "" {
		program = "."
	}
	args = append(args, program)
	args = append(args, req.GetArgs()...)

	config := req.GetConfig()
	if config == nil {
		config = map[string]string{} // the runner expects a JSON object, never null
	}
	configJSON, err := json.Marshal(config)
	if err != nil {
		return nil, fmt.Errorf("serialising config: %w", err)
	}
	secretKeys := req.GetConfigSecretKeys()
	if secretKeys == nil {
		secretKeys = []string{}
	}
	secretJSON, err := json.Marshal(secretKeys)
	if err != nil {
		return nil, fmt.Errorf("serialising secret config keys: %w", err)
	}

	cmd := exec.CommandContext(ctx, py, args...)
	cmd.Dir = req.GetPwd()
	cmd.Stdout = os.Stdout
	cmd.Stderr = os.Stderr
	cmd.Env = append(virtualenvEnv(os.Environ(), py),
		"PULUMI_CONFIG="+string(configJSON),
		"PULUMI_CONFIG_SECRET_KEYS="+string(secretJSON),
	)
	err = cmd.Start()
	if err == nil {
		h.track(cmd, true)
		err = cmd.Wait()
		h.track(cmd, false)
	}
	if err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			if status, ok := exitErr.Sys().(syscall.WaitStatus); ok {
				if status.ExitStatus() == bailExitCode {
					return &pulumirpc.RunResponse{Bail: true}, nil
				}
				return &pulumirpc.RunResponse{Error: fmt.Sprintf("Program exited with non-zero exit code: %d", status.ExitStatus())}, nil
			}
			return &pulumirpc.RunResponse{Error: fmt.Sprintf("Program exited unexpectedly: %v", exitErr)}, nil
		}
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("could not run %s: %v", py, err)}, nil
	}
	return &pulumirpc.RunResponse{}, nil
}

// RunPlugin runs a Python plugin program (for example a policy pack) and streams its
// output. The plugin's first stdout line is its gRPC port, which the engine reads.
func (h *host) RunPlugin(req *pulumirpc.RunPluginRequest, srv pulumirpc.LanguageRuntime_RunPluginServer) error {
	info := req.GetInfo()
	root := h.root(info)
	dir := req.GetProgram()
	if info != nil && info.GetProgramDirectory() != "" {
		dir = info.GetProgramDirectory()
	}
	if dir == "" {
		return errors.New("RunPlugin: no plugin directory given")
	}
	py := pythonFor(info, root)
	args := append([]string{"-u", dir}, req.GetArgs()...)
	cmd := exec.CommandContext(srv.Context(), py, args...)
	cmd.Dir = req.GetPwd()
	cmd.Env = virtualenvEnv(append(os.Environ(), req.GetEnv()...), py)

	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting plugin %s with %s: %w", dir, py, err)
	}
	h.track(cmd, true)
	defer h.track(cmd, false)
	var sendMu sync.Mutex
	send := func(r *pulumirpc.RunPluginResponse) {
		sendMu.Lock()
		defer sendMu.Unlock()
		_ = srv.Send(r)
	}
	var wg sync.WaitGroup
	pump := func(r io.Reader, wrap func([]byte) *pulumirpc.RunPluginResponse) {
		defer wg.Done()
		buf := make([]byte, 32*1024)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				chunk := append([]byte(nil), buf[:n]...)
				send(wrap(chunk))
			}
			if err != nil {
				return
			}
		}
	}
	wg.Add(2)
	go pump(stdout, func(b []byte) *pulumirpc.RunPluginResponse {
		return &pulumirpc.RunPluginResponse{Output: &pulumirpc.RunPluginResponse_Stdout{Stdout: b}}
	})
	go pump(stderr, func(b []byte) *pulumirpc.RunPluginResponse {
		return &pulumirpc.RunPluginResponse{Output: &pulumirpc.RunPluginResponse_Stderr{Stderr: b}}
	})
	wg.Wait()
	code := int32(0)
	if err := cmd.Wait(); err != nil {
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) {
			return err
		}
		code = int32(exitErr.ExitCode())
	}
	send(&pulumirpc.RunPluginResponse{Output: &pulumirpc.RunPluginResponse_Exitcode{Exitcode: code}})
	return nil
}

func (h *host) engine() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.engineAddress
}

// root is the project root: ProgramInfo's root directory, else the handshake's.
func (h *host) root(info *pulumirpc.ProgramInfo) string {
	if info != nil && info.GetRootDirectory() != "" {
		return info.GetRootDirectory()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rootDirectory
}

// pythonFor picks the interpreter: the `virtualenv` runtime option (relative to root),
// else $PULUMI_PYTHON_CMD, else python3 on $PATH.
func pythonFor(info *pulumirpc.ProgramInfo, root string) string {
	if venv := option(info.GetOptions(), "virtualenv"); venv != "" {
		if !filepath.IsAbs(venv) {
			venv = filepath.Join(root, venv)
		}
		return filepath.Join(venv, "bin", "python")
	}
	if cmd := os.Getenv("PULUMI_PYTHON_CMD"); cmd != "" {
		return cmd
	}
	return "python3"
}

// virtualenvEnv puts the interpreter's bin directory first on PATH, as an activated
// virtualenv would, and drops PYTHONHOME.
func virtualenvEnv(env []string, py string) []string {
	if !filepath.IsAbs(py) {
		return env
	}
	bin := filepath.Dir(py)
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		switch {
		case strings.HasPrefix(kv, "PYTHONHOME="):
			continue
		case strings.HasPrefix(kv, "PATH="):
			kv = "PATH=" + bin + string(os.PathListSeparator) + strings.TrimPrefix(kv, "PATH=")
		}
		out = append(out, kv)
	}
	return append(out, "VIRTUAL_ENV="+filepath.Dir(bin))
}

func option(opts *structpb.Struct, key string) string {
	if opts == nil {
		return ""
	}
	if v, ok := opts.GetFields()[key]; ok {
		return v.GetStringValue()
	}
	return ""
}
