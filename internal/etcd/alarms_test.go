package etcd

import (
	"context"
	"errors"
	"testing"
)

// TestAlarmsAskedOnlyWithErrors: the alarm list (a raft proposal) is not asked while no status answer reports an
// error; without any answer the alarms are unknown, not "none". (With errors it needs a live client: e2e.)
func TestAlarmsAskedOnlyWithErrors(t *testing.T) {
	ctx := context.Background()
	healthy := map[string]Status{"a": {MemberID: 1, LeaderID: 1}, "b": {Err: errors.New("timeout")}}
	got, err := alarms(ctx, nil, healthy) // a nil client would panic if asked
	if err != nil || got == nil || len(got) != 0 {
		t.Errorf("alarms of a cluster without errors = %v, %v; want none, known", got, err)
	}
	if got, err := alarms(ctx, nil, map[string]Status{"a": {Err: errors.New("timeout")}}); err == nil || got != nil {
		t.Errorf("alarms without any answer = %v, %v; want unknown (an error)", got, err)
	}
}
