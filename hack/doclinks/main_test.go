package main

import (
	"reflect"
	"testing"
	"testing/fstest"
)

func TestSlug(t *testing.T) {
	for h, want := range map[string]string{
		"Continuous backup and point-in-time restore":       "continuous-backup-and-point-in-time-restore",
		"Maintenance: defragmentation and NOSPACE":          "maintenance-defragmentation-and-nospace",
		"Backups and restores: `EtcdBackup`, `EtcdRestore`": "backups-and-restores-etcdbackup-etcdrestore",
		"Releasing it: `make plugin-dist`":                  "releasing-it-make-plugin-dist",
		"Power loss (and [crashes](x.md))":                  "power-loss-and-crashes",
		"status_field and 3.5 -> 3.7":                       "status_field-and-35---37",
	} {
		if got := slug(h); got != want {
			t.Errorf("slug(%q) = %q, want %q", h, got, want)
		}
	}
}

func TestCheck(t *testing.T) {
	fsys := fstest.MapFS{
		"README.md": {Data: []byte("# Top\n[ok](docs/a.md#a-section) [dup](docs/a.md#twice-1) [dir](docs/sub)\n" +
			"[gone](docs/missing.md) [bad anchor](docs/a.md#nowhere) [out](../x.md) [web](https://example.com/#x)\n" +
			"`[code](not/checked.md)`\n```\n[fenced](not/checked.md)\n```\n[self](#top) [self bad](#bottom)\n")},
		"docs/a.md":     {Data: []byte("# A\n## A section\n## Twice\n## Twice\n<a name=\"explicit\"></a>\n[back](../README.md#top) [html](#explicit) [go](../main.go#L3)\n")},
		"docs/sub/b.md": {Data: []byte("# B\n[up](../a.md#twice)\n[ref]: ../nothing.md\n")},
		"main.go":       {Data: []byte("package main\n")},
	}
	files, err := markdownFiles(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"README.md", "docs/a.md", "docs/sub/b.md"}; !reflect.DeepEqual(files, want) {
		t.Fatalf("files = %v, want %v", files, want)
	}
	got := check(fsys, files)
	want := []string{
		"README.md:3: docs/missing.md: no such file or directory",
		"README.md:3: docs/a.md#nowhere: no heading with anchor #nowhere in docs/a.md",
		"README.md:3: ../x.md: outside the repository",
		"README.md:8: #bottom: no heading with anchor #bottom in README.md",
		"docs/sub/b.md:3: ../nothing.md: no such file or directory",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("check:\n got %q\nwant %q", got, want)
	}
}

func TestUnindexed(t *testing.T) {
	fsys := fstest.MapFS{
		"README.md":      {Data: []byte("# Top\n")},
		"docs/README.md": {Data: []byte("# Index\n[a](a.md) [b](sub/b.md#b) `[c](sub/c.md)`\n")},
		"docs/a.md":      {Data: []byte("# A\n")},
		"docs/sub/b.md":  {Data: []byte("# B\n")},
		"docs/sub/c.md":  {Data: []byte("# C\n")},
		"docs/sub/d.md":  {Data: []byte("# D\n[a](../a.md)\n")},
	}
	files, err := markdownFiles(fsys)
	if err != nil {
		t.Fatal(err)
	}
	got := unindexed(fsys, files)
	want := []string{
		"docs/sub/c.md: not linked from the index docs/README.md",
		"docs/sub/d.md: not linked from the index docs/README.md",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("unindexed:\n got %q\nwant %q", got, want)
	}
}
