package etcdcluster

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/plan"
)

func TestHashCheckDue(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	check := func(ago time.Duration, result string, mismatched ...string) *etcdv1alpha1.HashCheck {
		return &etcdv1alpha1.HashCheck{Time: metav1.NewTime(now.Add(-ago)), Result: result, MismatchedMembers: mismatched}
	}
	listed := func(name string) bool { return name != "c-gone" }
	tests := map[string]struct {
		last     *etcdv1alpha1.HashCheck
		interval time.Duration
		want     bool
	}{
		"never checked":                               {nil, time.Hour, true},
		"turned off":                                  {nil, 0, false},
		"checked a minute ago":                        {check(time.Minute, plan.HashConsistent), time.Hour, false},
		"checked an hour ago":                         {check(time.Hour, plan.HashConsistent), time.Hour, true},
		"inconclusive a minute ago: again":            {check(time.Minute, plan.HashInconclusive), time.Hour, true},
		"inconclusive a second ago: not yet":          {check(time.Second, plan.HashInconclusive), time.Hour, false},
		"a mismatched member still listed: wait":      {check(time.Minute, plan.HashMismatch, "c-b"), time.Hour, false},
		"the mismatched member is gone: confirm soon": {check(time.Minute, plan.HashMismatch, "c-gone"), time.Hour, true},
		"a check from the future (clock moved back)":  {check(-time.Hour, plan.HashConsistent), time.Hour, true},
		"a short interval":                            {check(15*time.Second, plan.HashConsistent), 10 * time.Second, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := hashCheckDue(tc.last, tc.interval, now, listed); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
