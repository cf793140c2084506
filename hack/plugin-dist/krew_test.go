package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"steward.dev/steward/internal/version"
)

// fakeRelease writes archives of small stand-in binaries for every platform into dir, and their manifest.
func fakeRelease(t *testing.T, dir, v string) []byte {
	t.Helper()
	var archives []archive
	for _, p := range platforms {
		bin := filepath.Join(t.TempDir(), binName)
		if err := os.WriteFile(bin, []byte("binary for "+p.OS+"/"+p.Arch), 0o755); err != nil {
			t.Fatal(err)
		}
		name := archiveName(v, p)
		if err := writeArchiveFile(filepath.Join(dir, name), []archiveFile{{Name: binName, Path: bin, Mode: 0o755}}); err != nil {
			t.Fatal(err)
		}
		sum, err := sha256File(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		archives = append(archives, archive{Platform: p, Name: name, SHA256: sum, Files: []string{binName}})
	}
	m, err := encodeManifest(manifest(v, archives))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestManifestMatchesArchives(t *testing.T) {
	dir := t.TempDir()
	m := fakeRelease(t, dir, "1.2.3")
	if err := verify(m, dir, "1.2.3"); err != nil {
		t.Fatalf("a fresh manifest does not verify: %v", err)
	}
	for _, want := range []string{
		"uri: https://github.com/steward-dev/steward/releases/download/v1.2.3/kubectl-steward_1.2.3_darwin_arm64.tar.gz",
		"version: v1.2.3", "bin: kubectl-steward", "name: steward", "kind: Plugin",
	} {
		if !bytes.Contains(m, []byte(want)) {
			t.Errorf("manifest lacks %q:\n%s", want, m)
		}
	}
}

func TestVerifyCatches(t *testing.T) {
	tests := map[string]struct {
		change  func(t *testing.T, dir string, m []byte) []byte
		version string
		wantErr string
	}{
		"an archive rebuilt after the manifest": {
			change: func(t *testing.T, dir string, m []byte) []byte {
				bin := filepath.Join(t.TempDir(), binName)
				_ = os.WriteFile(bin, []byte("another build"), 0o755)
				if err := writeArchiveFile(filepath.Join(dir, archiveName("1.2.3", platform{"linux", "amd64"})), []archiveFile{{Name: binName, Path: bin, Mode: 0o755}}); err != nil {
					t.Fatal(err)
				}
				return m
			},
			wantErr: "linux/amd64: " + filepath.Join("DIR", "kubectl-steward_1.2.3_linux_amd64.tar.gz") + " has sha256",
		},
		"a missing archive": {
			change: func(t *testing.T, dir string, m []byte) []byte {
				_ = os.Remove(filepath.Join(dir, archiveName("1.2.3", platform{"darwin", "amd64"})))
				return m
			},
			wantErr: "darwin/amd64:",
		},
		"a placeholder sha256": {
			change: func(_ *testing.T, _ string, m []byte) []byte {
				p := parse(t, m)
				p.Spec.Platforms[1].SHA256 = "TODO"
				return encode(t, p)
			},
			wantErr: `linux/arm64: sha256 "TODO" is not a sha256`,
		},
		"a missing platform": {
			change: func(_ *testing.T, _ string, m []byte) []byte {
				p := parse(t, m)
				p.Spec.Platforms = p.Spec.Platforms[:3]
				return encode(t, p)
			},
			wantErr: "no entry for darwin/arm64",
		},
		"another version": {
			change:  func(_ *testing.T, _ string, m []byte) []byte { return m },
			version: "1.2.4",
			wantErr: "manifest version v1.2.3, the tree's is v1.2.4",
		},
		"a wrong bin": {
			change: func(_ *testing.T, _ string, m []byte) []byte {
				p := parse(t, m)
				p.Spec.Platforms[0].Bin = "kubectl-other"
				return encode(t, p)
			},
			wantErr: "bin kubectl-other is not an executable file",
		},
		"an unknown field": {
			change:  func(_ *testing.T, _ string, m []byte) []byte { return append(m, []byte("extra: 1\n")...) },
			wantErr: "unknown field",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			m := tc.change(t, dir, fakeRelease(t, dir, "1.2.3"))
			v := tc.version
			if v == "" {
				v = "1.2.3"
			}
			err := verify(m, dir, v)
			if err == nil {
				t.Fatal("verify passed")
			}
			if got := strings.ReplaceAll(err.Error(), dir, "DIR"); !strings.Contains(got, tc.wantErr) {
				t.Errorf("error %q, want one saying %q", got, tc.wantErr)
			}
		})
	}
}

func parse(t *testing.T, m []byte) Plugin {
	var p Plugin
	if err := yaml.Unmarshal(m, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func encode(t *testing.T, p Plugin) []byte {
	b, err := encodeManifest(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The same files give the same archive bytes: the manifest's sha256 is reproducible.
func TestArchivesAreReproducible(t *testing.T) {
	bin := filepath.Join(t.TempDir(), binName)
	if err := os.WriteFile(bin, []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := []archiveFile{{Name: binName, Path: bin, Mode: 0o755}}
	a, err := archiveBytes(files)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(bin, epoch, epoch.AddDate(3, 0, 0)); err != nil {
		t.Fatal(err)
	}
	b, err := archiveBytes(files)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("the same file gave two different archives")
	}
}

// The committed manifest is a real one for this tree's version: every platform, the release URIs, real-looking
// sha256 (its match with the archives is checked by make plugin-dist, which builds them).
func TestCommittedManifest(t *testing.T) {
	m, err := os.ReadFile(filepath.Join("..", "..", "plugins", pluginName+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := parse(t, m)
	if p.Spec.Version != version.Tag || len(p.Spec.Platforms) != len(platforms) {
		t.Fatalf("plugins/steward.yaml is for %s with %d platforms; the tree is %s (make plugin-dist)", p.Spec.Version, len(p.Spec.Platforms), version.Tag)
	}
	for i, pl := range p.Spec.Platforms {
		want := platforms[i]
		if pl.Selector.MatchLabels["os"] != want.OS || pl.Selector.MatchLabels["arch"] != want.Arch ||
			pl.URI != archiveURI(version.Version, want) || !hexSHA256.MatchString(pl.SHA256) || pl.Bin != binName {
			t.Errorf("platform %d: %+v", i, pl)
		}
	}
}
