package cli

import (
	"strings"
	"testing"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

func standbyCluster(phase etcdv1alpha1.StandbyPhase) *etcdv1alpha1.EtcdCluster {
	c := testCluster()
	c.Spec.Standby = &etcdv1alpha1.StandbySpec{Source: etcdv1alpha1.StandbySource{ClusterName: "main"}}
	if phase != "" {
		c.Status.Standby = &etcdv1alpha1.StandbyStatus{Phase: phase, PromotedRevision: 820}
	}
	return c
}

// TestPromote: promote sets spec.standby.promote, --force also forcePromotion (also on a promotion asked for
// before), and says what Steward does next; asked again it changes nothing.
func TestPromote(t *testing.T) {
	c := newFake(t, standbyCluster(etcdv1alpha1.StandbyFollowing))
	steps := []struct {
		args           []string
		want           []string
		promote, force bool
	}{
		{[]string{"promote", "db"}, []string{"etcdcluster.etcd.steward.dev/db promoting", "have not changed for 3m0s (fencingWindow)",
			"kubectl steward promote db --force", "Watch it: kubectl steward status db -n ns"}, true, false},
		{[]string{"promote", "db"}, []string{"etcdcluster.etcd.steward.dev/db already asked to promote (status.standby.phase Following)"}, true, false},
		{[]string{"promote", "db", "--force"}, []string{"etcdcluster.etcd.steward.dev/db promoting", "Forced: Steward does not wait"}, true, true},
		{[]string{"promote", "db", "--force"}, []string{"already asked to promote"}, true, true},
	}
	for _, s := range steps {
		before := readCluster(t, c)
		r := run(t, c, s.args...)
		after := readCluster(t, c)
		if r.code != ExitOK || after.Spec.Standby.Promote != s.promote || after.Spec.Standby.ForcePromotion != s.force {
			t.Fatalf("%v: exit %d (%s), spec.standby %+v", s.args, r.code, r.stderr, after.Spec.Standby)
		}
		for _, w := range s.want {
			if !strings.Contains(r.stdout+r.stderr, w) {
				t.Errorf("%v: output %q does not say %q", s.args, r.stdout+r.stderr, w)
			}
		}
		if strings.Contains(s.want[0], "already") && after.ResourceVersion != before.ResourceVersion {
			t.Errorf("%v: patched a cluster already asked to promote", s.args)
		}
	}
}

// TestPromoteRefusals: no patch for a cluster that is no standby or is promoted already.
func TestPromoteRefusals(t *testing.T) {
	for name, tc := range map[string]struct {
		cluster *etcdv1alpha1.EtcdCluster
		want    string
	}{
		"no standby": {testCluster(), "cluster db is no standby (spec.standby is not set)"},
		"promoted":   {standbyCluster(etcdv1alpha1.StandbyPromoted), "cluster db is promoted already (at revision 820)"},
	} {
		c := newFake(t, tc.cluster)
		before := readCluster(t, c)
		r := run(t, c, "promote", "db", "--force")
		if r.code != ExitError || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q, want 1 and %q", name, r.code, r.stderr, tc.want)
		}
		if after := readCluster(t, c); after.ResourceVersion != before.ResourceVersion {
			t.Errorf("%s: the refused promote patched the cluster", name)
		}
	}
}
