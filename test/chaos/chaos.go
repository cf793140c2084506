// Package chaos breaks etcd members on the test bed the way real failures do, for e2e tests: it cuts a member
// Pod off the network from inside its network namespace, kills a container's processes, and empties a local
// volume behind its claim's back. It needs root on the test bed's node and knows the kubelet's cgroupfs layout;
// it is a test helper, never part of Steward.
package chaos

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
)

// pids returns the processes of the Pod's containers whose cgroup directory (under the kubelet's pod cgroup
// pod<uid>) is named container: "*" for any container, the sandbox included.
func pids(pod *corev1.Pod, container string) []string {
	var dirs []string
	for _, pattern := range []string{"/sys/fs/cgroup/pids/kubepods/pod%s", "/sys/fs/cgroup/pids/kubepods/*/pod%s"} {
		m, _ := filepath.Glob(fmt.Sprintf(pattern, pod.UID))
		dirs = append(dirs, m...)
	}
	var out []string
	for _, dir := range dirs {
		procs, _ := filepath.Glob(filepath.Join(dir, container, "cgroup.procs"))
		for _, f := range procs {
			data, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			out = append(out, strings.Fields(string(data))...)
		}
	}
	return out
}

// podPID returns a PID of a process of the Pod (any container, the sandbox included).
func podPID(pod *corev1.Pod) (string, error) {
	if p := pids(pod, "*"); len(p) > 0 {
		return p[0], nil
	}
	return "", fmt.Errorf("no process of Pod %s/%s (uid %s) found in the kubelet's cgroups", pod.Namespace, pod.Name, pod.UID)
}

// KillContainer sends SIGKILL to every process of the Pod's running container named container, as an OOM kill
// or a crash would; the kubelet restarts it.
func KillContainer(pod *corev1.Pod, container string) error {
	id := ""
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == container && cs.State.Running != nil {
			_, id, _ = strings.Cut(cs.ContainerID, "://")
		}
	}
	if id == "" {
		return fmt.Errorf("container %s of Pod %s/%s is not running", container, pod.Namespace, pod.Name)
	}
	procs := pids(pod, id)
	if len(procs) == 0 {
		return fmt.Errorf("no process of container %s (%s) of Pod %s/%s found in the kubelet's cgroups", container, id, pod.Namespace, pod.Name)
	}
	for _, p := range procs {
		pid, err := strconv.Atoi(p)
		if err != nil {
			return fmt.Errorf("pid %q: %w", p, err)
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("kill %d: %w", pid, err)
		}
	}
	return nil
}

// WipeVolume deletes everything inside a `local` PersistentVolume's directory on this node, leaving the directory
// (and so the claim, the volume and its mount) intact: a disk replaced or reformatted under a running Pod.
func WipeVolume(pv *corev1.PersistentVolume) error {
	if pv.Spec.Local == nil || pv.Spec.Local.Path == "" {
		return fmt.Errorf("PersistentVolume %s is not a local volume", pv.Name)
	}
	entries, err := os.ReadDir(pv.Spec.Local.Path)
	if err != nil {
		return fmt.Errorf("read volume %s: %w", pv.Name, err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(pv.Spec.Local.Path, e.Name())); err != nil {
			return fmt.Errorf("wipe volume %s: %w", pv.Name, err)
		}
	}
	return nil
}

// CutOffNetwork drops every packet into and out of the Pod (loopback excepted), as a node losing its network
// would. The returned function restores it.
func CutOffNetwork(pod *corev1.Pod) (restore func() error, err error) {
	pid, err := podPID(pod)
	if err != nil {
		return nil, err
	}
	// While the sandbox is being set up, the Pod's cgroup can hold a process that is still in the host's
	// network namespace (runc's init before it enters the Pod's): rules put there would cut off the node. The
	// namespace checked is held open and handed to nsenter, so it cannot change between the check and the rules.
	netns, err := os.Open("/proc/" + pid + "/ns/net")
	if err != nil {
		return nil, fmt.Errorf("network namespace of pid %s of Pod %s/%s: %w", pid, pod.Namespace, pod.Name, err)
	}
	var podNet, hostNet syscall.Stat_t
	if err := syscall.Fstat(int(netns.Fd()), &podNet); err != nil {
		_ = netns.Close()
		return nil, err
	}
	if err := syscall.Stat("/proc/self/ns/net", &hostNet); err != nil {
		_ = netns.Close()
		return nil, err
	}
	if podNet.Ino == hostNet.Ino && podNet.Dev == hostNet.Dev {
		_ = netns.Close()
		return nil, fmt.Errorf("pid %s of Pod %s/%s is in the host's network namespace (sandbox not set up yet)", pid, pod.Namespace, pod.Name)
	}
	run := func(args ...string) error {
		// fd 3 in nsenter is netns (ExtraFiles[0]).
		full := append([]string{"--net=/proc/self/fd/3", "iptables", "-w"}, args...)
		cmd := exec.Command("nsenter", full...)
		cmd.ExtraFiles = []*os.File{netns}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("nsenter %v: %w: %s", full, err, out)
		}
		return nil
	}
	if err := run("-I", "INPUT", "!", "-i", "lo", "-j", "DROP"); err != nil {
		_ = netns.Close()
		return nil, err
	}
	if err := run("-I", "OUTPUT", "!", "-o", "lo", "-j", "DROP"); err != nil {
		_ = netns.Close()
		return nil, err
	}
	return func() error {
		defer func() { _ = netns.Close() }()
		for _, chain := range []string{"INPUT", "OUTPUT"} {
			if err := run("-F", chain); err != nil {
				return err
			}
		}
		return nil
	}, nil
}
