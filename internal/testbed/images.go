package testbed

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

const imageRegistry = "steward.local"

// EtcdImage is the image reference of the locally built etcd image at version (as in EtcdVersions, no "v").
// It contains /usr/local/bin/etcd, etcdctl and etcdutl, runs as UID 65532 and has no shell.
func EtcdImage(version string) string { return fmt.Sprintf("%s/etcd:v%s", imageRegistry, version) }

// AgentImage is the locally built image of Steward's backup agent (cmd/steward-agent), rebuilt at every start.
const AgentImage = imageRegistry + "/steward-agent:dev"

const (
	pauseImage   = imageRegistry + "/pause:v1"
	coreDNSImage = imageRegistry + "/coredns:" + CoreDNSVersion
	nonRootUser  = "65532"
)

// imageFile is one file of a single-layer image.
type imageFile struct {
	path   string // absolute path in the image
	source string // file on the host to copy
	data   string // content, when source is empty
	mode   int64
}

// baseFiles make a scratch image usable by a non-root process: a user to run as and a writable /tmp.
var baseFiles = []imageFile{
	{path: "/etc/passwd", data: "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n", mode: 0o644},
	{path: "/etc/group", data: "root:x:0:\nnonroot:x:65532:\n", mode: 0o644},
}

// writeImage writes a single-layer image as a docker-archive tarball that `ctr images import` accepts.
func writeImage(out, ref string, files []imageFile, entrypoint []string, user string) error {
	if _, err := os.Stat(out); err == nil {
		return nil
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	layerPath := out + ".layer"
	if err := writeLayer(layerPath, append(append([]imageFile{}, baseFiles...), files...)); err != nil {
		return fmt.Errorf("write layer of %s: %w", ref, err)
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
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		return fmt.Errorf("write image %s: %w", ref, err)
	}
	return os.Rename(tmp, out)
}

func writeLayer(path string, files []imageFile) error {
	f, err := os.Create(path)
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
		if err := addDir(filepath.Dir(file.path), 0o755); err != nil {
			return err
		}
		var r io.Reader
		size := int64(len(file.data))
		if file.source != "" {
			src, err := os.Open(file.source)
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
			r = strings.NewReader(file.data)
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: file.path[1:], Mode: file.mode, Size: size, ModTime: epoch}); err != nil {
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

// importImage loads an image tarball into the CRI namespace of the test bed's containerd.
func (c *Cluster) importImage(ctx context.Context, tarPath string) error {
	out, err := exec.CommandContext(ctx, "ctr", "--address", c.containerdSocket(), "--namespace", "k8s.io",
		"images", "import", "--platform", "linux/amd64", tarPath).CombinedOutput()
	if err != nil {
		return fmt.Errorf("import image %s into containerd: %w: %s", tarPath, err, out)
	}
	return nil
}
