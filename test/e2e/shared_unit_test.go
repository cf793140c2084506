package e2e

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestGateAdmitsLongestFirst: tests that arrive together are admitted longest first, never more than the slots
// at a time. Runs without the test bed.
func TestGateAdmitsLongestFirst(t *testing.T) {
	g := &scheduler{slots: 2}
	var mu sync.Mutex
	var order []string
	inside, most := 0, 0
	t.Run("group", func(t *testing.T) {
		for _, tt := range []struct {
			name string
			d    time.Duration
		}{{"short", time.Second}, {"long", 9 * time.Minute}, {"mid", 3 * time.Minute}, {"tiny", 0}, {"longer", 10 * time.Minute}} {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				g.enter(t, tt.d)
				mu.Lock()
				order = append(order, tt.name)
				inside++
				most = max(most, inside)
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
				mu.Lock()
				inside--
				mu.Unlock()
			})
		}
	})
	// The first two start together (in either order), then one more as each ends, longest first.
	first := fmt.Sprint(order[:2])
	if (first != "[longer long]" && first != "[long longer]") || fmt.Sprint(order[2:]) != "[mid short tiny]" {
		t.Errorf("admitted in order %v, want longer and long, then mid, short, tiny", order)
	}
	if most > 2 {
		t.Errorf("%d tests inside at once with 2 slots", most)
	}
}
