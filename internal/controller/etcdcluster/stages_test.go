package etcdcluster

import (
	"testing"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/plan"
)

// TestUpgradeStages: a cluster on the operator's images passes through the operator's --upgrade-via releases in
// the same repository; a cluster that pins its image has none, so the planner refuses a jump of two minors.
func TestUpgradeStages(t *testing.T) {
	o := testOpts
	o.UpgradeVia = []string{"3.6.16", "3.7.3"}
	c := &etcdv1alpha1.EtcdCluster{Spec: etcdv1alpha1.EtcdClusterSpec{Version: "3.7.3"}}
	got := specOf(c, o).UpgradeVia
	want := map[string]plan.Release{
		"3.6": {Version: "3.6.16", Image: "steward.local/etcd:v3.6.16"},
		"3.7": {Version: "3.7.3", Image: "steward.local/etcd:v3.7.3"},
	}
	if len(got) != len(want) || got["3.6"] != want["3.6"] || got["3.7"] != want["3.7"] {
		t.Fatalf("stages %v, want %v", got, want)
	}
	c.Spec.Image = "registry.example/etcd:3.7.3-patched"
	if got := specOf(c, o).UpgradeVia; got != nil {
		t.Fatalf("stages %v with a pinned image, want none", got)
	}
	o.UpgradeVia = nil
	c.Spec.Image = ""
	if got := specOf(c, o).UpgradeVia; got != nil {
		t.Fatalf("stages %v without --upgrade-via, want none", got)
	}
}
