// Package chaos breaks etcd members on the test bed the way real failures do, for e2e tests: it cuts a member
// Pod off the network from inside its network namespace, kills or wedges a container's processes, empties a local
// volume behind its claim's back, and rewrites a key in a stopped member's database. It needs root on the test
// bed's node and knows the kubelet's cgroupfs layout; it is a test helper, never part of Steward.
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
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
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

// runningContainerID is the runtime's ID of the Pod's running container named container (the name of its cgroup
// directory).
func runningContainerID(pod *corev1.Pod, container string) (string, error) {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == container && cs.State.Running != nil {
			_, id, _ := strings.Cut(cs.ContainerID, "://")
			return id, nil
		}
	}
	return "", fmt.Errorf("container %s of Pod %s/%s is not running", container, pod.Namespace, pod.Name)
}

// KillContainer sends SIGKILL to every process of the Pod's running container named container, as an OOM kill
// or a crash would; the kubelet restarts it.
func KillContainer(pod *corev1.Pod, container string) error {
	id, err := runningContainerID(pod, container)
	if err != nil {
		return err
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

// WedgeProcess sends SIGSTOP to the processes named command (their /proc/PID/comm) of the Pod's running container
// named container: the process stays, holds its ports and files, and answers nothing, as one stuck on a hung disk
// does. The kubelet's SIGKILL of the container ends it.
func WedgeProcess(pod *corev1.Pod, container, command string) error {
	id, err := runningContainerID(pod, container)
	if err != nil {
		return err
	}
	wedged := 0
	for _, p := range pids(pod, id) {
		comm, err := os.ReadFile(filepath.Join("/proc", p, "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != command {
			continue
		}
		pid, err := strconv.Atoi(p)
		if err != nil {
			return fmt.Errorf("pid %q: %w", p, err)
		}
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			return fmt.Errorf("stop %d: %w", pid, err)
		}
		wedged++
	}
	if wedged == 0 {
		return fmt.Errorf("no process %q in container %s (%s) of Pod %s/%s", command, container, id, pod.Namespace, pod.Name)
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

// CorruptKey rewrites, in the etcd database file on a `local` PersistentVolume, the stored value of every
// revision of key to value, behind etcd's back: the silent divergence a bad disk or an etcd bug leaves in one
// member's data (its raft log and its peers know nothing of it). The member must be stopped (bbolt's file lock
// would make this wait, and it gives up after a few seconds). It returns how many revisions it rewrote.
func CorruptKey(pv *corev1.PersistentVolume, key, value string) (int, error) {
	if pv.Spec.Local == nil || pv.Spec.Local.Path == "" {
		return 0, fmt.Errorf("PersistentVolume %s is not a local volume", pv.Name)
	}
	path := filepath.Join(pv.Spec.Local.Path, "data", "member", "snap", "db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", path, err)
	}
	n := 0
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("key"))
		if b == nil {
			return fmt.Errorf("%s has no key bucket", path)
		}
		rewrites := map[string][]byte{}
		if err := b.ForEach(func(rev, raw []byte) error {
			var kv mvccpb.KeyValue
			if err := kv.Unmarshal(raw); err != nil {
				return fmt.Errorf("revision %x: %w", rev, err)
			}
			if string(kv.Key) != key || len(kv.Value) == 0 {
				return nil // not the key, or its deletion (a tombstone)
			}
			kv.Value = []byte(value)
			out, err := kv.Marshal()
			if err != nil {
				return err
			}
			rewrites[string(rev)] = out
			return nil
		}); err != nil {
			return err
		}
		for rev, out := range rewrites {
			if err := b.Put([]byte(rev), out); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if cerr := db.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err == nil && n == 0 {
		err = fmt.Errorf("key %q not found in %s", key, path)
	}
	return n, err
}
