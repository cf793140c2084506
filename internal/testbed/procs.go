package testbed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one component the test bed started. It runs in its own session so that it outlives the process
// that started it (the playground exits and leaves the cluster running) and is found again by its PID file.
type process struct {
	name   string
	pid    int
	log    string
	exited chan struct{} // closed when the process exits while the starter is still alive
}

func (c *Cluster) pidDir() string { return filepath.Join(c.opts.StateDir, "pids") }
func (c *Cluster) logDir() string { return filepath.Join(c.opts.StateDir, "logs") }

// Spawn starts a process that belongs to the test bed: it is stopped with the cluster (also by Down from another
// process). Output goes to logs/<name>.log in the state dir; env entries are added to the environment.
func (c *Cluster) Spawn(name string, env []string, bin string, args ...string) error {
	_, err := c.spawnEnv(name, env, bin, args...)
	return err
}

// spawn starts bin with args, output to logs/<name>.log, and records its PID.
func (c *Cluster) spawn(name, bin string, args ...string) (*process, error) {
	return c.spawnEnv(name, nil, bin, args...)
}

func (c *Cluster) spawnEnv(name string, env []string, bin string, args ...string) (*process, error) {
	logPath := filepath.Join(c.logDir(), name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer func() { _ = logFile.Close() }()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Env = append(append(os.Environ(), "PATH="+c.path()), env...)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	p := &process{name: name, pid: cmd.Process.Pid, log: logPath, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	if err := os.WriteFile(filepath.Join(c.pidDir(), name+".pid"), []byte(strconv.Itoa(p.pid)+"\n"+bin+"\n"), 0o644); err != nil {
		return nil, err
	}
	c.procsMu.Lock()
	c.procs = append(c.procs, p)
	c.procsMu.Unlock()
	return p, nil
}

// path puts the cached binaries first, so components that exec helpers (kubelet, containerd) find ours: a
// containerd 2 finds its own shim before the machine's.
func (c *Cluster) path() string {
	dirs := c.kubeBin
	if c.ctrdBin != "" {
		dirs += ":" + c.ctrdBin
	}
	return dirs + ":" + os.Getenv("PATH") + ":/usr/sbin:/sbin"
}

// waitFor polls check until it returns nil, the process p exits, or timeout. The error names the component and
// carries the end of its log, which is where the reason a component did not come up is written.
func (c *Cluster) waitFor(ctx context.Context, p *process, what string, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = check(ctx); last == nil {
			return nil
		}
		var exited <-chan struct{}
		if p != nil {
			exited = p.exited
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited before %s; end of %s:\n%s", p.name, what, p.log, logTail(p.log, 30))
		case <-ctx.Done():
			msg := fmt.Sprintf("%s: not done after %s (last check: %v)", what, timeout, last)
			if p != nil {
				msg += fmt.Sprintf("; end of %s:\n%s", p.log, logTail(p.log, 30))
			}
			return errors.New(msg)
		case <-tick.C:
		}
	}
}

func logTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	return tail(string(data), n)
}

// recordedProcesses reads the PID files of a state dir, in the reverse order of their start.
func recordedProcesses(stateDir string) []recorded {
	entries, _ := os.ReadDir(filepath.Join(stateDir, "pids"))
	var out []recorded
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(stateDir, "pids", e.Name()))
		if err != nil {
			continue
		}
		fields := strings.Split(strings.TrimSpace(string(data)), "\n")
		pid, err := strconv.Atoi(fields[0])
		if err != nil || len(fields) < 2 {
			continue
		}
		info, _ := e.Info()
		out = append(out, recorded{name: strings.TrimSuffix(e.Name(), ".pid"), pid: pid, bin: fields[1], started: info.ModTime()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].started.After(out[j].started) })
	return out
}

type recorded struct {
	name    string
	pid     int
	bin     string
	started time.Time
}

// alive reports whether pid still runs the recorded binary; a PID reused by an unrelated process is left alone.
func (r recorded) alive() bool {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", r.pid))
	if err != nil {
		return false
	}
	return strings.TrimSuffix(exe, " (deleted)") == r.bin
}

// terminate sends SIGTERM to the processes, waits up to grace for them to exit, then SIGKILLs what is left and
// waits up to 5 seconds more.
func terminate(pids []int, grace time.Duration) {
	signal := func(sig syscall.Signal) {
		for _, pid := range pids {
			_ = syscall.Kill(pid, sig)
		}
	}
	signal(syscall.SIGTERM)
	if allGone(pids, grace) {
		return
	}
	signal(syscall.SIGKILL)
	allGone(pids, 5*time.Second)
}

// allGone waits up to timeout for every process to exit and reports whether they did.
func allGone(pids []int, timeout time.Duration) bool {
	return Eventually(context.Background(), timeout, 100*time.Millisecond, func() error {
		for _, pid := range pids {
			if processExists(pid) {
				return fmt.Errorf("pid %d still running", pid)
			}
		}
		return nil
	}) == nil
}

// processExists is true for a live process; a zombie (exited, not yet reaped by its parent) counts as gone.
func processExists(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// processesMatching lists PIDs whose command line contains any of the needles, or whose cgroup path contains
// any of the cgroup needles. This finds what the test bed started indirectly: containerd shims (their command
// line names our containerd socket) and container processes (they live in the kubelet's pod cgroups).
func processesMatching(cmdNeedles, cgroupNeedles []string) []int {
	entries, _ := os.ReadDir("/proc")
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || pid == 1 || !processExists(pid) {
			continue // zombies count as gone: this machine's init may never reap them
		}
		if cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && containsAny(string(cmd), cmdNeedles) {
			pids = append(pids, pid)
			continue
		}
		if cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid)); err == nil && containsAny(string(cg), cgroupNeedles) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func containsAny(s string, needles []string) bool {
	for _, n := range needles {
		if n != "" && strings.Contains(s, n) {
			return true
		}
	}
	return false
}

// ComponentMemory is the resident memory (VmRSS, bytes) of each running process the test bed started, by its
// name: the control plane and every node's kubelet, containerd and provisioner. Containers are not included.
func (c *Cluster) ComponentMemory() map[string]int64 {
	out := map[string]int64{}
	for _, r := range recordedProcesses(c.opts.StateDir) {
		if !r.alive() {
			continue
		}
		if m, err := ProcessMemory(r.pid); err == nil {
			if rss, ok := m["VmRSS"]; ok {
				out[r.name] = rss
			}
		}
	}
	return out
}

// ProcessMemory is the memory a process's /proc/<pid>/status reports in kB (VmRSS, VmHWM, RssAnon, RssFile, ...),
// in bytes, by field name.
func ProcessMemory(pid int) (map[string]int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 3 && strings.HasSuffix(f[0], ":") && f[2] == "kB" {
			if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				out[strings.TrimSuffix(f[0], ":")] = kb * 1024
			}
		}
	}
	return out, nil
}
