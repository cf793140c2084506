// Command image builds Steward's image without Docker: it compiles the operator and steward-agent as static
// linux/amd64 binaries and writes them, with a non-root user and nothing else, as a docker-archive tarball
// tagged with the release's reference (internal/version) and any -tag given. `make image` runs it; load the
// result with `docker load`, `ctr images import` or `crane push`.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"steward.dev/steward/internal/ociimage"
	"steward.dev/steward/internal/version"
)

type tags []string

func (t *tags) String() string     { return strings.Join(*t, ",") }
func (t *tags) Set(v string) error { *t = append(*t, v); return nil }

func main() {
	out := flag.String("o", filepath.Join("_output", "steward-"+version.Tag+".tar"), "tarball to write")
	var extra tags
	flag.Var(&extra, "tag", "another reference to tag the image with (repeatable), e.g. a mirror registry's")
	flag.Parse()
	if err := build(*out, append([]string{version.Image}, extra...)); err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("wrote %s (%s)\n", *out, strings.Join(append([]string{version.Image}, extra...), ", "))
}

func build(out string, refs []string) error {
	binDir, err := os.MkdirTemp("", "steward-image-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(binDir) }()
	bins := map[string]string{"./cmd/steward": filepath.Join(binDir, "steward"), "./cmd/steward-agent": filepath.Join(binDir, "steward-agent")}
	for pkg, bin := range bins {
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, pkg) //nolint:gosec // our own packages, into our temp dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("build %s: %w", pkg, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o750); err != nil {
		return err
	}
	return ociimage.Steward(out, bins["./cmd/steward"], bins["./cmd/steward-agent"], refs...)
}
