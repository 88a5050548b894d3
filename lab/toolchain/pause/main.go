// Command pause is the lab node's pod sandbox process: it holds a pod's namespaces, reaps
// the zombies re-parented to it (it is PID 1 of the sandbox) and exits on SIGINT/SIGTERM.
// The lab builds it because no registry image (registry.k8s.io/pause) can be pulled there;
// it does what upstream's build/pause/linux/pause.c does, in Go.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
