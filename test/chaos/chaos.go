// Package chaos breaks etcd members on the test bed the way real failures do, for e2e tests: it cuts a member
// Pod off the network from inside its network namespace. It needs root on the test bed's node and knows the
// kubelet's cgroupfs layout; it is a test helper, never part of Steward.
package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// podPID returns a PID of a process of the Pod (any container, the sandbox included), found through the
// kubelet's pod cgroup pod<uid>.
func podPID(pod *corev1.Pod) (string, error) {
	var dirs []string
	for _, pattern := range []string{"/sys/fs/cgroup/pids/kubepods/pod%s", "/sys/fs/cgroup/pids/kubepods/*/pod%s"} {
		m, _ := filepath.Glob(fmt.Sprintf(pattern, pod.UID))
		dirs = append(dirs, m...)
	}
	for _, dir := range dirs {
		procs, _ := filepath.Glob(filepath.Join(dir, "*", "cgroup.procs"))
		for _, f := range procs {
			data, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			if fields := strings.Fields(string(data)); len(fields) > 0 {
				return fields[0], nil
			}
		}
	}
	return "", fmt.Errorf("no process of Pod %s/%s (uid %s) found in the kubelet's cgroups", pod.Namespace, pod.Name, pod.UID)
}

// CutOffNetwork drops every packet into and out of the Pod (loopback excepted), as a node losing its network
// would. The returned function restores it.
func CutOffNetwork(pod *corev1.Pod) (restore func() error, err error) {
	pid, err := podPID(pod)
	if err != nil {
		return nil, err
	}
	run := func(args ...string) error {
		full := append([]string{"-t", pid, "-n", "iptables", "-w"}, args...)
		if out, err := exec.Command("nsenter", full...).CombinedOutput(); err != nil {
			return fmt.Errorf("nsenter %v: %w: %s", full, err, out)
		}
		return nil
	}
	if err := run("-I", "INPUT", "!", "-i", "lo", "-j", "DROP"); err != nil {
		return nil, err
	}
	if err := run("-I", "OUTPUT", "!", "-o", "lo", "-j", "DROP"); err != nil {
		return nil, err
	}
	return func() error {
		for _, chain := range []string{"INPUT", "OUTPUT"} {
			if err := run("-F", chain); err != nil {
				return err
			}
		}
		return nil
	}, nil
}
