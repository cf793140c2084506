package backup

import (
	"errors"
	"fmt"
	"syscall"
)

// SpaceOf measures the file system that holds dir: its size, and what an unprivileged writer (the backup Job
// runs as non-root) may still take, which leaves out the blocks reserved for root.
func SpaceOf(dir string) (Space, error) {
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		return Space{}, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return spaceFrom(fs.Bavail, fs.Blocks, fs.Bsize)
}

// spaceFrom turns statfs's block counts into bytes, refusing what cannot be a volume.
func spaceFrom(availBlocks, blocks uint64, blockSize int64) (Space, error) {
	const maxBlocks = 1 << 62
	if blockSize <= 0 || blocks == 0 || availBlocks > blocks || blocks > maxBlocks/uint64(blockSize) {
		return Space{}, fmt.Errorf("statfs reported %d of %d blocks of %d bytes free", availBlocks, blocks, blockSize)
	}
	bs := uint64(blockSize)
	return Space{Available: int64(availBlocks * bs), Capacity: int64(blocks * bs)}, nil //nolint:gosec // bounded above by maxBlocks
}

// IsNoSpace reports whether err is a write that found its volume full or its quota used up.
func IsNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
