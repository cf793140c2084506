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

// TestHealthyThroughNoSpace: a member that lists only NOSPACE alarms among its errors still counts as healthy (it
// serves reads and deletes and stays in step); any other error, a CORRUPT alarm or no leader does not.
func TestHealthyThroughNoSpace(t *testing.T) {
	tests := map[string]struct {
		s    Status
		want bool
	}{
		"no errors":                   {Status{LeaderID: 1}, true},
		"NOSPACE of this member":      {Status{LeaderID: 1, Errors: []string{"memberID:2 alarm:NOSPACE "}}, true},
		"NOSPACE of two members":      {Status{LeaderID: 1, Errors: []string{"memberID:2 alarm:NOSPACE ", "memberID:3 alarm:NOSPACE "}}, true},
		"CORRUPT":                     {Status{LeaderID: 1, Errors: []string{"memberID:2 alarm:CORRUPT "}}, false},
		"NOSPACE and CORRUPT":         {Status{LeaderID: 1, Errors: []string{"memberID:2 alarm:NOSPACE ", "memberID:3 alarm:CORRUPT "}}, false},
		"no leader":                   {Status{Errors: []string{"etcdserver: no leader"}}, false},
		"NOSPACE but no leader known": {Status{Errors: []string{"memberID:2 alarm:NOSPACE "}}, false},
		"the request failed":          {Status{LeaderID: 1, Err: errors.New("timeout")}, false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tt.s.Healthy(); got != tt.want {
				t.Errorf("Healthy() = %v, want %v", got, tt.want)
			}
		})
	}
}
