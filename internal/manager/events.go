package manager

import (
	"k8s.io/client-go/tools/record"
)

// Event spam filter: client-go's default lets 25 Events per object through and then one every five minutes, so
// a long operation (an upgrade of five members through two minors records some forty) loses its last Events, the
// ones that say how it ended. Steward records one Event per step it takes, and steps are paced by reconciles.
const (
	eventBurst = 200
	// eventRefillPerSecond: one more Event per object every ten seconds once the burst is spent.
	eventRefillPerSecond = 0.1
)

// EventBroadcaster is the broadcaster the manager records Events with: client-go's, with a spam filter sized for
// an operator whose Events each stand for a step. The caller shuts it down when its manager stops.
func EventBroadcaster() record.EventBroadcaster {
	return record.NewBroadcasterWithCorrelatorOptions(record.CorrelatorOptions{BurstSize: eventBurst, QPS: eventRefillPerSecond})
}
