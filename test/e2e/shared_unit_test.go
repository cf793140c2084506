package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestGateAdmitsLongestFirst: tests that arrive together are admitted longest first, never more than the slots
// at a time. Runs without the test bed. The order checked is the gate's own record of admissions: two tests
// admitted in the same instant append to a shared list in whatever order the runtime wakes them.
func TestGateAdmitsLongestFirst(t *testing.T) {
	g := &scheduler{slots: 2, arrivals: 5}
	var mu sync.Mutex
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
	var order []string
	for _, name := range g.admitted {
		order = append(order, strings.TrimPrefix(name, t.Name()+"/group/"))
	}
	// The first two start together, then one more as each ends, longest first.
	if got := fmt.Sprint(order); got != "[longer long mid short tiny]" {
		t.Errorf("admitted in order %v, want longer, long, mid, short, tiny", order)
	}
	if most > 2 {
		t.Errorf("%d tests inside at once with 2 slots", most)
	}
}
