package testbed

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// binarySet is a group of commands built together from one pinned module under third_party.
type binarySet struct {
	name     string   // cache key prefix and progress label
	version  string   // shown in progress and part of the cache key
	module   string   // directory under third_party
	packages []string // import paths of the commands
	ldflags  string
	tags     string // build tags, comma-separated
	estimate string // how long a cold build takes here, for the progress line
}

func kubernetesSet(v string) binarySet {
	_, minor := kubernetesMinor(v)
	flags := []string{
		"-s", "-w",
		"-X k8s.io/component-base/version.gitVersion=" + v,
		"-X k8s.io/component-base/version.gitMajor=1",
		"-X k8s.io/component-base/version.gitMinor=" + minor,
		"-X k8s.io/client-go/pkg/version.gitVersion=" + v,
	}
	var pkgs []string
	for _, c := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "kubelet", "kubectl"} {
		pkgs = append(pkgs, "k8s.io/kubernetes/cmd/"+c)
	}
	return binarySet{name: "kubernetes", version: v, module: kubernetesModule(v), packages: pkgs,
		ldflags: strings.Join(flags, " "), estimate: "about 15 minutes on 2 cores with a cold Go cache"}
}

func etcdSet(version string) binarySet {
	return binarySet{name: "etcd", version: "v" + version, module: "etcd-v" + version,
		packages: []string{"go.etcd.io/etcd/server/v3", "go.etcd.io/etcd/etcdctl/v3", "go.etcd.io/etcd/etcdutl/v3"},
		ldflags:  "-s -w", estimate: "about 2 minutes"}
}

// containerdSet is containerd 2 with its runc shim and ctr, built without cgo: the tags leave out the snapshotters
// that need it or kernel modules the test bed does not use (it runs overlayfs), as containerd's static release does.
func containerdSet() binarySet {
	return binarySet{name: "containerd", version: ContainerdVersion, module: "containerd-v2",
		packages: []string{"github.com/containerd/containerd/v2/cmd/containerd", "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2",
			"github.com/containerd/containerd/v2/cmd/ctr"},
		ldflags: "-s -w -X github.com/containerd/containerd/v2/version.Version=" + ContainerdVersion,
		tags:    "no_btrfs,no_devmapper,no_zfs,urfave_cli_no_docs,osusergo,netgo", estimate: "about 5 minutes"}
}

func coreDNSSet() binarySet {
	return binarySet{name: "coredns", version: CoreDNSVersion, module: "coredns",
		packages: []string{"steward.dev/testbed/coredns"}, ldflags: "-s -w", estimate: "about 3 minutes"}
}

// builder builds binaries into the per-machine cache and reports progress.
type builder struct {
	opts Options
}

func (b *builder) progress(format string, args ...any) {
	_, _ = fmt.Fprintf(b.opts.Progress, "testbed: "+format+"\n", args...)
}

// ensure returns the directory holding the set's binaries, building them first unless an identical build (same
// version, module files and build tags) is cached. The etcd server builds as "server"; it is renamed to "etcd".
func (b *builder) ensure(ctx context.Context, set binarySet) (string, error) {
	modDir := filepath.Join(b.opts.ModuleRoot, "internal", "testbed", "third_party", set.module)
	sum, err := hashTree(modDir)
	if err != nil {
		return "", fmt.Errorf("hash module %s: %w", modDir, err)
	}
	key := fmt.Sprintf("%s-%s-%s", set.name, set.version, sum[:12])
	if set.tags != "" { // other tags build another binary from the same module
		t := sha256.Sum256([]byte(set.tags))
		key += "-" + hex.EncodeToString(t[:])[:8]
	}
	return b.cached(key, fmt.Sprintf("building %s %s from Go modules", set.name, set.version), set.estimate, func(tmp string) error {
		args := []string{"build", "-trimpath", "-ldflags", set.ldflags, "-o", tmp + "/"}
		if set.tags != "" {
			args = append(args, "-tags", set.tags)
		}
		args = append(args, set.packages...)
		if err := b.goCommand(ctx, modDir, fmt.Sprintf("%s %s", set.name, set.version), args...); err != nil {
			return err
		}
		if set.name == "etcd" {
			if err := os.Rename(filepath.Join(tmp, "server"), filepath.Join(tmp, "etcd")); err != nil {
				return fmt.Errorf("rename etcd server binary: %w", err)
			}
		}
		return nil
	})
}

// cached returns the cache directory bin/key, filling it first unless a complete one is there: fill writes into
// a fresh temporary directory beside it, which is marked complete and moved into place only once fill succeeded,
// so an interrupted build never passes for a cached one. doing and estimate (what a fill does and how long it
// takes) are for the progress line.
func (b *builder) cached(key, doing, estimate string, fill func(tmp string) error) (string, error) {
	dir := filepath.Join(b.opts.CacheDir, "bin", key)
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
		return dir, nil
	}
	b.progress("%s (%s; cached in %s afterwards)", doing, estimate, dir)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".build-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	if err := fill(tmp); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, ".complete"), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return "", err
	}
	_ = os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("move %s into the cache: %w", key, err)
	}
	return dir, nil
}

// buildLocal builds one of Steward's own commands (the pause program, the test bed CLI) into dir/name. The go
// command's build cache makes this a link step after the first time.
func (b *builder) buildLocal(ctx context.Context, pkg, out string) error {
	return b.goCommand(ctx, b.opts.ModuleRoot, pkg, "build", "-trimpath", "-o", out, pkg)
}

// goCommand runs the go command with static linking, printing a line every minute so a long cold build is
// visibly alive.
func (b *builder) goCommand(ctx context.Context, dir, label string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=readonly")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				b.progress("  still building %s (%s so far)", label, time.Since(start).Round(time.Second))
			}
		}
	}()
	err := cmd.Run()
	close(done)
	if err != nil {
		return fmt.Errorf("go %s in %s: %w\n%s", strings.Join(args[:1], " "), dir, err, tail(out.String(), 40))
	}
	if time.Since(start) > 10*time.Second {
		b.progress("  built %s in %s", label, time.Since(start).Round(time.Second))
	}
	return nil
}

// hashTree is a checksum of the regular files of a module directory, so a changed pin rebuilds.
func hashTree(dir string) (string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	h := sha256.New()
	for _, f := range files {
		rel, _ := filepath.Rel(dir, f)
		_, _ = io.WriteString(h, rel+"\x00")
		data, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		_, _ = h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
