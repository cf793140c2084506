package etcdcluster

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/controller/etcdrestore"
	"steward.dev/steward/internal/resources"
)

// TestNamesDerivedFromTheLongestNames: every name Steward derives from the longest names admission lets through
// (an EtcdCluster of 57 characters, test/bundle's TestAdmissionOfNames; EtcdRestores of 63) is valid for its
// kind, so a cluster admitted is never one whose Services, Pods or restores Kubernetes refuses.
func TestNamesDerivedFromTheLongestNames(t *testing.T) {
	for _, name := range []string{"a" + strings.Repeat("b", 56), "db"} {
		c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Spec: etcdv1alpha1.EtcdClusterSpec{Bootstrap: &etcdv1alpha1.BootstrapSpec{FromBackup: &etcdv1alpha1.BackupSource{
				PointInTime: &etcdv1alpha1.PointInTimeSource{ScheduleName: "s"}}}}}
		member := newMemberNames(c.Name, 1, map[string]bool{})[0]
		check := func(what, value string, valid func(string) []string) {
			t.Helper()
			if errs := valid(value); len(errs) > 0 {
				t.Errorf("cluster %s (%d characters): %s %q: %v", name, len(name), what, value, errs)
			}
		}
		check("client Service", resources.ClientServiceName(c), validation.IsDNS1035Label)
		check("peer Service", resources.PeerServiceName(c), validation.IsDNS1035Label)
		check("member (Pod hostname)", member, validation.IsDNS1123Label)
		check("PVC", resources.PVCName(member), validation.IsDNS1123Subdomain)
		check("member TLS Secret", resources.MemberSecretName(member), validation.IsDNS1123Subdomain)
		check("CA Secret", resources.CASecretName(c), validation.IsDNS1123Subdomain)
		check("client Secret", resources.ClientSecretName(c), validation.IsDNS1123Subdomain)
		check("operator credentials Secret", resources.OperatorCredentialsSecretName(c), validation.IsDNS1123Subdomain)
		for k, v := range resources.MemberLabels(c, member) {
			check("label "+k, v, validation.IsValidLabelValue)
		}
		// Steward's own kinds it creates for the cluster carry their names in labels (at most 63 characters).
		bootstrap := FromBackupRestoreName(c)
		auto := autoRestoreName(c.Name, time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC))
		check("bootstrap EtcdRestore", bootstrap, validation.IsValidLabelValue)
		check("bootstrap point-in-time EtcdBackup", etcdv1alpha1.BootstrapBackupName(c), validation.IsValidLabelValue)
		check("quorum-loss EtcdRestore", auto, validation.IsValidLabelValue)
		for _, restore := range []string{bootstrap, auto, "r" + strings.Repeat("x", 62)} {
			rs := &etcdv1alpha1.EtcdRestore{ObjectMeta: metav1.ObjectMeta{Name: restore}, Spec: etcdv1alpha1.EtcdRestoreSpec{
				PointInTime: &etcdv1alpha1.PointInTimeSource{ScheduleName: "s"}}}
			check("safety EtcdBackup", etcdrestore.SafetyBackupName(rs), validation.IsValidLabelValue)
			check("point-in-time EtcdBackup", etcdv1alpha1.RestoreBackupName(rs), validation.IsValidLabelValue)
		}
		// The restore's point-in-time backup is the one the cluster waits for.
		rs := &etcdv1alpha1.EtcdRestore{ObjectMeta: metav1.ObjectMeta{Name: bootstrap}, Spec: etcdv1alpha1.EtcdRestoreSpec{
			PointInTime: &etcdv1alpha1.PointInTimeSource{ScheduleName: "s"}}}
		if got, want := etcdv1alpha1.RestoreBackupName(rs), etcdv1alpha1.BootstrapBackupName(c); got != want {
			t.Errorf("cluster %s: its restore makes backup %s, the cluster starts from %s", name, got, want)
		}
	}
	if got := FromBackupRestoreName(&etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db"}}); got != "db-from-backup" {
		t.Errorf("a short name is kept as it was: %s", got)
	}
}

func TestDerivedNameKeepsLongNamesApart(t *testing.T) {
	a, b := strings.Repeat("x", 60)+"-1", strings.Repeat("x", 60)+"-2"
	if etcdv1alpha1.DerivedName(a, "-safety") == etcdv1alpha1.DerivedName(b, "-safety") {
		t.Errorf("two long names share a derived name: %s", etcdv1alpha1.DerivedName(a, "-safety"))
	}
	if got := etcdv1alpha1.DerivedName(a, "-safety"); len(got) != etcdv1alpha1.MaxDerivedNameLength || !strings.HasSuffix(got, "-safety") {
		t.Errorf("DerivedName = %s (%d characters)", got, len(got))
	}
}
