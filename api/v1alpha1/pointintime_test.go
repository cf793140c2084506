package v1alpha1

import (
	"testing"
	"time"
)

// TestTargetTime: RFC 3339 times with or without a fraction and with any offset keep every digit; anything
// else is refused.
func TestTargetTime(t *testing.T) {
	for in, want := range map[string]string{
		"":                                    "0001-01-01T00:00:00Z",
		"2026-11-25T14:03:00Z":                "2026-11-25T14:03:00Z",
		"2026-11-25T14:03:00.25Z":             "2026-11-25T14:03:00.25Z",
		"2026-11-25T15:03:00.123456789+01:00": "2026-11-25T14:03:00.123456789Z",
	} {
		got, err := (&PointInTimeSource{Time: in}).TargetTime()
		if err != nil || got.UTC().Format(time.RFC3339Nano) != want {
			t.Errorf("%q: %v %v, want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"yesterday", "2026-11-25", "14:03:00", "2026-11-25T14:03:00"} {
		if _, err := (&PointInTimeSource{Time: bad}).TargetTime(); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
