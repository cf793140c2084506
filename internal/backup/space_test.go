package backup

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
)

func TestSpaceFrom(t *testing.T) {
	for name, tc := range map[string]struct {
		avail, blocks uint64
		bsize         int64
		want          Space
		ok            bool
	}{
		"4 KiB blocks":          {avail: 10, blocks: 100, bsize: 4096, want: Space{Available: 40960, Capacity: 409600}, ok: true},
		"full":                  {avail: 0, blocks: 100, bsize: 4096, want: Space{Capacity: 409600}, ok: true},
		"no blocks":             {avail: 0, blocks: 0, bsize: 4096},
		"more free than blocks": {avail: 101, blocks: 100, bsize: 4096},
		"no block size":         {avail: 1, blocks: 100, bsize: 0},
		"overflows int64":       {avail: 1, blocks: 1 << 60, bsize: 4096},
	} {
		got, err := spaceFrom(tc.avail, tc.blocks, tc.bsize)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%s: got %+v, %v; want %+v, ok %t", name, got, err, tc.want, tc.ok)
		}
	}
}

func TestSpaceOfADirectory(t *testing.T) {
	sp, err := SpaceOf(t.TempDir())
	if err != nil || sp.Capacity <= 0 || sp.Available < 0 || sp.Available > sp.Capacity {
		t.Fatalf("SpaceOf a temporary directory: %+v, %v", sp, err)
	}
	if _, err := SpaceOf("/does/not/exist"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("SpaceOf a missing directory: %v, want ENOENT", err)
	}
}

func TestIsNoSpace(t *testing.T) {
	for err, want := range map[error]bool{
		fmt.Errorf("write pvc://c/p: %w", &os.PathError{Op: "write", Path: "/x", Err: syscall.ENOSPC}): true,
		fmt.Errorf("sync: %w", syscall.EDQUOT):                                                         true,
		fmt.Errorf("write: %w", syscall.EIO):                                                           false,
		ErrExists:                                                                                      false,
	} {
		if got := IsNoSpace(err); got != want {
			t.Errorf("IsNoSpace(%v) = %t, want %t", err, got, want)
		}
	}
}
