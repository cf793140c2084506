package testbed

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// podCgroupNeedle finds node 0's container processes: its kubelet (cgroupfs driver) puts every pod under
// kubepods. The other nodes' kubelets put theirs under cgroup roots of their own (Node.cgroupRoot), all found by
// nodesCgroupNeedle.
const (
	podCgroupNeedle   = ":/kubepods"
	nodesCgroupNeedle = ":/steward-testbed-"
)

// down stops everything a test bed in opts.StateDir started and undoes its changes to the host, whether the
// processes belong to this process or an earlier one. It is forceful on purpose: the clusters are disposable,
// and a graceful drain would make every Stop wait on pods' grace periods.
func down(opts Options, kubeProxyBin string) error {
	var pids []int
	for _, r := range recordedProcesses(opts.StateDir) {
		if r.alive() {
			pids = append(pids, r.pid)
		}
	}
	terminate(pids, 5*time.Second)
	// What the components started in turn: containerd's shims (their command line names a node's socket) and
	// the containers (in the kubelets' pod cgroups). SIGKILL: their managers are already gone.
	socket := filepath.Join(opts.RunDir, "containerd")
	// Several rounds, because killing a shim can leave a container process that was not yet in a pod cgroup
	// when the list was taken.
	for round := 0; round < 5; round++ {
		indirect := processesMatching([]string{socket, opts.StateDir + "/"}, []string{podCgroupNeedle, nodesCgroupNeedle})
		if len(indirect) == 0 {
			break
		}
		terminate(indirect, 0)
	}

	unmountUnder(opts.StateDir, opts.RunDir)
	teardownNetwork(kubeProxyBin)
	removePodCgroups()

	if left := processesMatching([]string{socket, opts.StateDir + "/"}, []string{podCgroupNeedle, nodesCgroupNeedle}); len(left) > 0 {
		return fmt.Errorf("test bed processes still running after stop: %s", describeProcesses(left))
	}
	for _, r := range recordedProcesses(opts.StateDir) {
		if r.alive() {
			return fmt.Errorf("test bed process %s (pid %d) still running after stop", r.name, r.pid)
		}
	}
	return nil
}

// unmountUnder detaches every mount below the given directories, deepest first: volumes and service account
// tokens the kubelet mounted, container root filesystems and sandbox /dev/shm mounts of containerd.
func unmountUnder(dirs ...string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer func() { _ = f.Close() }()
	var mounts []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		for _, d := range dirs {
			if mp == d || strings.HasPrefix(mp, d+"/") {
				mounts = append(mounts, mp)
			}
		}
	}
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
	for _, mp := range mounts {
		_ = syscall.Unmount(mp, syscall.MNT_DETACH)
	}
}

// unescapeMount decodes the octal escapes (\040 for space) of /proc/self/mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v uint8
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &v); err == nil {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removePodCgroups removes the kubelets' (now empty) pod cgroups and the nodes' cgroup roots, deepest first, in
// every hierarchy.
func removePodCgroups() {
	var roots []string
	for _, pattern := range []string{"/sys/fs/cgroup/*/kubepods", "/sys/fs/cgroup/kubepods", "/sys/fs/cgroup/*/steward-testbed-*", "/sys/fs/cgroup/steward-testbed-*"} {
		found, _ := filepath.Glob(pattern)
		roots = append(roots, found...)
	}
	removeCgroupTrees(roots)
}

// removeNodeCgroups removes a stopped node's (now empty) pod cgroups, as its machine's reboot would.
func removeNodeCgroups(root string) {
	sub := filepath.Join(root, "kubepods")
	roots, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*", sub))
	roots = append(roots, filepath.Join("/sys/fs/cgroup", sub))
	removeCgroupTrees(roots)
}

// removeCgroupTrees removes the cgroups under each root and the root, deepest first.
func removeCgroupTrees(roots []string) {
	for _, root := range roots {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			_ = syscall.Rmdir(d)
		}
	}
}

// describeProcesses names processes by PID and command line, for an error a human can act on.
func describeProcesses(pids []int) string {
	var parts []string
	for _, pid := range pids {
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		parts = append(parts, fmt.Sprintf("%d (%s)", pid, strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))))
	}
	return strings.Join(parts, ", ")
}
