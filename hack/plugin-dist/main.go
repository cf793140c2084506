// Command plugin-dist builds kubectl-steward's release archives for every krew platform
// (_output/plugin/kubectl-steward_<version>_<os>_<arch>.tar.gz) and writes the krew manifest
// plugins/steward.yaml from them, with their real sha256, then checks the manifest against the archives.
// `make plugin-dist` runs it; -check only checks an existing manifest against existing archives. The builds
// are reproducible (-trimpath, no cgo, no VCS stamp, fixed archive metadata): the same tree and Go release give
// the same sha256.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"steward.dev/steward/internal/version"
)

func main() {
	out := flag.String("out", filepath.Join("_output", "plugin"), "directory for the archives")
	manifestPath := flag.String("manifest", filepath.Join("plugins", pluginName+".yaml"), "krew manifest to write")
	check := flag.Bool("check", false, "only check the manifest against the archives in -out")
	flag.Parse()
	if err := run(*out, *manifestPath, *check); err != nil {
		fmt.Fprintf(os.Stderr, "plugin-dist: %v\n", err)
		os.Exit(1)
	}
}

func run(out, manifestPath string, check bool) error {
	if !check {
		if err := dist(out, manifestPath); err != nil {
			return err
		}
	}
	m, err := os.ReadFile(manifestPath) //nolint:gosec // the manifest path the user gave
	if err != nil {
		return err
	}
	if err := verify(m, out, version.Version); err != nil {
		return fmt.Errorf("%s does not match the archives in %s:\n%w", manifestPath, out, err)
	}
	fmt.Printf("%s matches the archives in %s (v%s, %d platforms)\n", manifestPath, out, version.Version, len(platforms))
	return nil
}

// dist builds, archives and writes the manifest.
func dist(out, manifestPath string) error {
	if err := os.MkdirAll(out, 0o750); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "plugin-dist-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	var extra []archiveFile
	if _, err := os.Stat("LICENSE"); err == nil {
		extra = append(extra, archiveFile{Name: "LICENSE", Path: "LICENSE", Mode: 0o644})
	}
	var archives []archive
	for _, p := range platforms {
		bin := filepath.Join(tmp, p.OS+"-"+p.Arch, binName)
		fmt.Printf("building %s for %s/%s\n", binName, p.OS, p.Arch)
		cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", bin, "./cmd/kubectl-steward") //nolint:gosec // our own package, into our temp dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("build for %s/%s: %w", p.OS, p.Arch, err)
		}
		files := append([]archiveFile{{Name: binName, Path: bin, Mode: 0o755}}, extra...)
		name := archiveName(version.Version, p)
		path := filepath.Join(out, name)
		if err := writeArchiveFile(path, files); err != nil {
			return fmt.Errorf("archive for %s/%s: %w", p.OS, p.Arch, err)
		}
		sum, err := sha256File(path)
		if err != nil {
			return err
		}
		a := archive{Platform: p, Name: name, SHA256: sum}
		for _, f := range files {
			a.Files = append(a.Files, f.Name)
		}
		archives = append(archives, a)
		fmt.Printf("wrote %s (sha256 %s)\n", path, sum)
	}
	b, err := encodeManifest(manifest(version.Version, archives))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(manifestPath), 0o750); err != nil {
		return err
	}
	if err := os.WriteFile(manifestPath, b, 0o644); err != nil { //nolint:gosec // a public manifest, committed
		return err
	}
	// A copy next to the archives: the release's assets and its manifest together.
	return os.WriteFile(filepath.Join(out, pluginName+".yaml"), b, 0o644) //nolint:gosec // as above
}

func writeArchiveFile(path string, files []archiveFile) error {
	f, err := os.Create(path) //nolint:gosec // under the output directory
	if err != nil {
		return err
	}
	if err := writeArchive(f, files); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
