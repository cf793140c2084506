package ociimage

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestSteward: the image runs the operator as a non-root user, holds both binaries where Jobs look for them and
// nothing to run besides (no shell), answers to every reference it was tagged with, and is the same image
// (digest) when built twice from the same binaries.
func TestSteward(t *testing.T) {
	dir := t.TempDir()
	steward, agent := filepath.Join(dir, "steward"), filepath.Join(dir, "steward-agent")
	for f, content := range map[string]string{steward: "operator binary", agent: "agent binary"} {
		if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	refs := []string{"ghcr.io/steward-dev/steward:v1.2.3", "steward.local/steward:dev"}
	out := filepath.Join(dir, "img.tar")
	if err := Steward(out, steward, agent, refs...); err != nil {
		t.Fatal(err)
	}
	var digests []string
	for _, ref := range refs {
		tag, err := name.NewTag(ref)
		if err != nil {
			t.Fatal(err)
		}
		img, err := tarball.ImageFromPath(out, &tag)
		if err != nil {
			t.Fatalf("read %s back: %v", ref, err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS != "linux" || cf.Architecture != "amd64" || cf.Config.User != NonRootUser ||
			!reflect.DeepEqual(cf.Config.Entrypoint, []string{"/usr/local/bin/steward"}) {
			t.Errorf("%s: config = %+v", ref, cf.Config)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d.String())
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("%s: %d layers, %v; want 1", ref, len(layers), err)
		}
		files := layerFiles(t, layers[0].Uncompressed)
		for path, want := range map[string]string{"usr/local/bin/steward": "operator binary", "usr/local/bin/steward-agent": "agent binary"} {
			if f, ok := files[path]; !ok || f.content != want || f.mode != 0o755 {
				t.Errorf("%s: %s = %+v, want mode 0755 and %q", ref, path, f, want)
			}
		}
		if f := files["tmp/"]; f.mode != 0o1777 {
			t.Errorf("%s: /tmp mode %o, want 1777 (writable for the non-root user)", ref, f.mode)
		}
		for _, shell := range []string{"bin/sh", "bin/bash", "usr/bin/sh"} {
			if _, ok := files[shell]; ok {
				t.Errorf("%s: image has %s", ref, shell)
			}
		}
	}
	again := filepath.Join(dir, "again.tar")
	if err := Steward(again, steward, agent, refs[0]); err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag(refs[0])
	img, err := tarball.ImageFromPath(again, &tag)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := img.Digest(); d.String() != digests[0] {
		t.Errorf("digest %s the second time, %s the first: the build is not reproducible", d, digests[0])
	}
}

func TestWriteNeedsAReference(t *testing.T) {
	if err := Write(filepath.Join(t.TempDir(), "x.tar"), nil, nil, []string{"/x"}, NonRootUser); err == nil {
		t.Error("an image without a reference was written")
	}
	if err := Write(filepath.Join(t.TempDir(), "x.tar"), []string{"Not A Reference!"}, nil, []string{"/x"}, NonRootUser); err == nil {
		t.Error("an image with an invalid reference was written")
	}
}

type layerFile struct {
	mode    int64
	content string
}

func layerFiles(t *testing.T, open func() (io.ReadCloser, error)) map[string]layerFile {
	t.Helper()
	rc, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	files := map[string]layerFile{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = layerFile{mode: h.Mode, content: string(b)}
	}
}
