package etcdcluster

import (
	"testing"
	"time"
)

// TestDefragmentedMark reads the volume's record of a defragmentation in both forms: with the revision the cluster
// was compacted to (NOSPACE recoveries) and without it (threshold defragmentations, and marks written before the
// revision was recorded); anything else is no record.
func TestDefragmentedMark(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		mark      string
		ok        bool
		reclaimed int64
		compacted int64
	}{
		{formatDefragmented(at, 30408704, 4900), true, 30408704, 4900},
		{formatDefragmented(at, 30408704, 0), true, 30408704, 0},
		{"2026-11-29T10:00:00Z 512", true, 512, 0},
		{"2026-11-29T10:00:00Z 512 x", false, 0, 0},
		{"2026-11-29T10:00:00Z 512 4900 1", false, 0, 0},
		{"2026-11-29T10:00:00Z", false, 0, 0},
		{"yesterday 512", false, 0, 0},
		{"", false, 0, 0},
	}
	for _, tt := range tests {
		d, compacted := parseDefragmented(tt.mark)
		if (d != nil) != tt.ok {
			t.Errorf("%q: parsed %v, want a record %v", tt.mark, d, tt.ok)
			continue
		}
		if d == nil {
			continue
		}
		if !d.Time.Time.Equal(at) || d.ReclaimedBytes != tt.reclaimed || compacted != tt.compacted {
			t.Errorf("%q: %s %d compacted %d, want %s %d compacted %d", tt.mark, d.Time, d.ReclaimedBytes, compacted, at, tt.reclaimed, tt.compacted)
		}
	}
}
