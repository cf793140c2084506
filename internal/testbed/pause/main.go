// Command pause is the test bed's pod sandbox process: it holds the pod's namespaces open, reaps zombies (it is
// PID 1 when a pod shares its process namespace) and exits on SIGINT or SIGTERM. It is what the pause image of a
// container runtime does, built here because the test bed has no registry to pull from.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
