// Package ociimage writes the small single-layer images Steward and its test bed run: static binaries on an
// empty base with a non-root user and nothing else (no shell, no package manager), as docker-archive tarballs
// that `ctr images import`, `docker load` and `crane push` accept. No Docker daemon is needed, so the images
// are built the same way on a developer's machine, in CI and in the test bed.
package ociimage

import (
	"archive/tar"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// NonRootUser is the UID the images run as (distroless's "nonroot"), so a Pod's runAsNonRoot holds without a
// runAsUser.
const NonRootUser = "65532"

// File is one file of an image.
type File struct {
	Path   string // absolute path in the image
	Source string // file on the host to copy
	Data   string // content, when Source is empty
	Mode   int64
}

// baseFiles make an empty image usable by a non-root process: a user to run as and a writable /tmp.
var baseFiles = []File{
	{Path: "/etc/passwd", Data: "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n", Mode: 0o644},
	{Path: "/etc/group", Data: "root:x:0:\nnonroot:x:65532:\n", Mode: 0o644},
}

// Write writes a single-layer linux/amd64 image with files (plus the base files), tagged with every reference in
// refs, to out. Timestamps are fixed, so the same files give the same image digest.
func Write(out string, refs []string, files []File, entrypoint []string, user string) error {
	if len(refs) == 0 {
		return fmt.Errorf("write image %s: no reference to tag it with", out)
	}
	layerPath := out + ".layer"
	if err := writeLayer(layerPath, append(append([]File{}, baseFiles...), files...)); err != nil {
		return fmt.Errorf("write layer of %s: %w", refs[0], err)
	}
	defer func() { _ = os.Remove(layerPath) }()
	layer, err := tarball.LayerFromFile(layerPath)
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", "amd64", v1.Time{Time: time.Unix(0, 0)}
	cf.Config = v1.Config{Entrypoint: entrypoint, User: user, WorkingDir: "/", Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin"}}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	tagged := map[name.Reference]v1.Image{}
	for _, ref := range refs {
		tag, err := name.NewTag(ref)
		if err != nil {
			return fmt.Errorf("image reference %q: %w", ref, err)
		}
		tagged[tag] = img
	}
	tmp := out + ".tmp"
	if err := tarball.MultiRefWriteToFile(tmp, tagged); err != nil {
		return fmt.Errorf("write image %s: %w", refs[0], err)
	}
	return os.Rename(tmp, out)
}

// Steward writes Steward's image: the operator as entrypoint and steward-agent beside it (backup, restore and
// verify Jobs name /usr/local/bin/steward-agent), both static binaries.
func Steward(out, stewardBin, agentBin string, refs ...string) error {
	return Write(out, refs, []File{
		{Path: "/usr/local/bin/steward", Source: stewardBin, Mode: 0o755},
		{Path: "/usr/local/bin/steward-agent", Source: agentBin, Mode: 0o755},
	}, []string{"/usr/local/bin/steward"}, NonRootUser)
}

func writeLayer(path string, files []File) error {
	f, err := os.Create(path) //nolint:gosec // the caller names where its image goes
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	tw := tar.NewWriter(f)
	epoch := time.Unix(0, 0)
	dirs := map[string]bool{}
	addDir := func(dir string, mode int64) error {
		if dirs[dir] || dir == "/" {
			return nil
		}
		dirs[dir] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir[1:] + "/", Mode: mode, ModTime: epoch})
	}
	for _, d := range []string{"/etc", "/usr", "/usr/local", "/usr/local/bin", "/home", "/var", "/var/lib"} {
		if err := addDir(d, 0o755); err != nil {
			return err
		}
	}
	if err := addDir("/tmp", 0o1777); err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "home/nonroot/", Mode: 0o755, Uid: 65532, Gid: 65532, ModTime: epoch}); err != nil {
		return err
	}
	for _, file := range files {
		if err := addDir(filepath.Dir(file.Path), 0o755); err != nil {
			return err
		}
		var r io.Reader
		size := int64(len(file.Data))
		if file.Source != "" {
			src, err := os.Open(file.Source)
			if err != nil {
				return err
			}
			defer func() { _ = src.Close() }()
			st, err := src.Stat()
			if err != nil {
				return err
			}
			r, size = src, st.Size()
		} else {
			r = strings.NewReader(file.Data)
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: file.Path[1:], Mode: file.Mode, Size: size, ModTime: epoch}); err != nil {
			return err
		}
		if _, err := io.Copy(tw, r); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}
