package etcdcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/etcdauth"
	"steward.dev/steward/internal/pitr"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/internal/testbed"
)

func standbyTestCluster() *etcdv1alpha1.EtcdCluster {
	c := testCluster()
	c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderNone}
	c.Spec.Auth = &etcdv1alpha1.AuthSpec{Enabled: true}
	c.Spec.Standby = &etcdv1alpha1.StandbySpec{Source: etcdv1alpha1.StandbySource{ClusterName: "main",
		Destination: etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Destination{Endpoint: "minio:9000", Bucket: "etcd", Key: "prod/main"}}}}
	return c
}

// TestStandbyWaitsForItsSeed: a new standby starts no member before its seed backup is Complete (a restore of a
// seed that does not exist would fail for good), then starts from it through the bootstrap restore.
func TestStandbyWaitsForItsSeed(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	c := standbyTestCluster()
	cl := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(c).WithStatusSubresource(&etcdv1alpha1.EtcdCluster{}, &etcdv1alpha1.EtcdBackup{}).Build()
	r := &Reconciler{Client: cl, Recorder: record.NewFakeRecorder(100), Etcd: etcd.NewPool(), Options: testOpts, Now: func() time.Time { return now }}
	got := reconcileOnce(t, r, c)
	if n := len(memberPods(t, cl)); n != 0 {
		t.Fatalf("%d member Pods before the seed exists", n)
	}
	p := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionProgressing)
	sb := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionStandby)
	if p == nil || p.Reason != etcdv1alpha1.ReasonBootstrapping || !strings.Contains(p.Message, "db-standby-seed") ||
		sb == nil || sb.Status != metav1.ConditionFalse || sb.Reason != etcdv1alpha1.ReasonBootstrapping || got.Status.Standby.Phase != etcdv1alpha1.StandbyBootstrapping {
		t.Fatalf("before the seed: Progressing %+v, Standby %+v, status %+v", p, sb, got.Status.Standby)
	}

	// The seed: a record of the primary's snapshot, found by the backup controller's Job in the source, read only.
	seed := &etcdv1alpha1.EtcdBackup{}
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "db-standby-seed"}, seed); err != nil {
		t.Fatalf("the seed: %v", err)
	}
	if sp := seed.Spec; sp.ClusterName != "db" || sp.StandbySeed == nil || sp.StandbySeed.ClusterName != "main" || sp.DeletionPolicy != etcdv1alpha1.DeletionPolicyRetain ||
		sp.Destination.S3 == nil || sp.Destination.S3.Key != "prod/main" || !metav1.IsControlledBy(seed, c) {
		t.Fatalf("seed spec %+v, owners %v", sp, seed.OwnerReferences)
	}
	reconcileOnce(t, r, got)
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "db-from-backup"}, &etcdv1alpha1.EtcdRestore{}); err == nil {
		t.Fatal("a restore of the seed before it is Complete")
	}
	seed.Status.ClusterID, seed.Status.Path = "87afdd7b6dce50e8", "prod/main/main-20261129T110000Z.db"
	seed.Status.Conditions = []metav1.Condition{{Type: etcdv1alpha1.ConditionComplete, Status: metav1.ConditionTrue, Reason: "Succeeded", LastTransitionTime: metav1.NewTime(now)}}
	if err := cl.Status().Update(context.Background(), seed); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, r, got)
	rs := &etcdv1alpha1.EtcdRestore{}
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "db-from-backup"}, rs); err != nil || rs.Spec.BackupName != "db-standby-seed" {
		t.Fatalf("the seed's restore: %+v, %v", rs.Spec, err)
	}
}

// TestStandbyFollowsAndPromotes replays a standby's life through the controller's standby step, one pass after
// another, against a fake API server and applier reports: the applier started for the seed's source identity,
// its report in status, a gap reported as a stop, a promotion refused while the source advances and allowed once
// it has been quiet for the window, the phase recorded before the applier is deleted, and nothing started again
// while it goes.
func TestStandbyFollowsAndPromotes(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	c := standbyTestCluster()
	c.Status.Bootstrapped = true
	seed := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db-standby-seed"}}
	seed.Status.ClusterID = "87afdd7b6dce50e8"
	seed.Status.Conditions = []metav1.Condition{{Type: etcdv1alpha1.ConditionComplete, Status: metav1.ConditionTrue, Reason: "Succeeded"}}
	cl := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(c).WithStatusSubresource(&etcdv1alpha1.EtcdCluster{}).Build()
	rec := record.NewFakeRecorder(100)
	var report *pitr.StandbyStatus
	r := &Reconciler{Client: cl, Recorder: rec, Etcd: etcd.NewPool(), Options: testOpts, Now: func() time.Time { return now },
		ReadApplier: func(context.Context, string) (pitr.StandbyStatus, error) {
			if report == nil {
				return pitr.StandbyStatus{}, apierrors.NewServiceUnavailable("not yet")
			}
			return *report, nil
		}}
	pass := func() (*observation, error) {
		t.Helper()
		if err := cl.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
			t.Fatal(err)
		}
		obs := &observation{plan: plan.Observation{Bootstrapped: true, StandbySeedComplete: true}, standbySeed: seed}
		err := r.reconcileStandby(ctx, c, obs)
		before := c.DeepCopy()
		r.statusStandby(c, obs)
		if err := cl.Status().Patch(ctx, c, client.MergeFrom(before)); err != nil {
			t.Fatal(err)
		}
		return obs, err
	}
	applier := func() *appsv1.Deployment {
		d := &appsv1.Deployment{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "db-standby"}, d); err != nil {
			return nil
		}
		return d
	}
	readyPod := func() {
		t.Helper()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db-standby-x", Labels: resources.StandbyApplierLabels(c)},
			Status: corev1.PodStatus{PodIP: "10.0.0.9", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
		if err := cl.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	standby := func(want etcdv1alpha1.StandbyPhase, status metav1.ConditionStatus, reason, message string) {
		t.Helper()
		cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionStandby)
		if c.Status.Standby == nil || c.Status.Standby.Phase != want || cond == nil || cond.Status != status || cond.Reason != reason || !strings.Contains(cond.Message, message) {
			t.Fatalf("status.standby %+v, condition %+v; want phase %s, %s/%s saying %q", c.Status.Standby, cond, want, status, reason, message)
		}
	}

	// Formed from the seed: first the write fence, which needs etcd (none answers here): nothing runs, and the
	// standby is not reported as following while clients could write.
	if _, err := pass(); err == nil || !strings.Contains(err.Error(), "standby fence") {
		t.Fatalf("fencing without etcd: %v", err)
	}
	standby(etcdv1alpha1.StandbyBootstrapping, metav1.ConditionFalse, etcdv1alpha1.ReasonFencingWrites, "refuse client writes")
	if applier() != nil {
		t.Fatal("the applier started before the fence")
	}
	// The fence made (TestStandbyFencesAndPromotes makes it against etcd): the applier starts for the source
	// identity the seed recorded, which status keeps.
	fence := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db-standby-fence",
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(c, etcdv1alpha1.GroupVersion.WithKind("EtcdCluster"))}},
		Data: map[string]string{fenceRecordKey: "{}", fenceStateKey: fenceStateFenced}}
	if err := cl.Create(ctx, fence); err != nil {
		t.Fatal(err)
	}
	if _, err := pass(); err != nil {
		t.Fatal(err)
	}
	d := applier()
	if d == nil || !strings.Contains(strings.Join(d.Spec.Template.Spec.Containers[0].Args, " "), "--cluster-id=87afdd7b6dce50e8") {
		t.Fatalf("applier: %+v", d)
	}
	standby(etcdv1alpha1.StandbyFollowing, metav1.ConditionFalse, etcdv1alpha1.ReasonApplierStarting, "not reported")
	if c.Status.Standby.SourceClusterID != "87afdd7b6dce50e8" {
		t.Fatalf("source cluster ID not remembered: %+v", c.Status.Standby)
	}

	// Following: the report's lag in status.
	readyPod()
	report = &pitr.StandbyStatus{AppliedRevision: 480, SourceRevision: 500, LagRevisions: 20, LagSeconds: 2.6, LagKnown: true,
		LastSegment: "seg-x", SourceChanged: now.Add(-time.Second)}
	obs, _ := pass()
	standby(etcdv1alpha1.StandbyFollowing, metav1.ConditionTrue, etcdv1alpha1.ReasonFollowing, "20 revisions, 2.6s behind")
	if st := c.Status.Standby; st.AppliedRevision != 480 || st.SourceRevision != 500 || st.LagRevisions != 20 || st.LagSeconds != 3 || st.LastSegment != "seg-x" ||
		st.SourceChangedTime == nil || st.ObservedTime == nil {
		t.Fatalf("status.standby %+v", st)
	}
	if got := standbyRequeue(obs, 30*time.Second); got != requeueStandby {
		t.Fatalf("requeue %s, want %s", got, requeueStandby)
	}

	// A gap: stopped, with a Warning.
	report.Stopped, report.Message = etcdv1alpha1.ReasonSegmentGap, "revisions 501..510 are missing before segment seg-y"
	if _, err := pass(); err != nil {
		t.Fatal(err)
	}
	standby(etcdv1alpha1.StandbyStopped, metav1.ConditionFalse, etcdv1alpha1.ReasonSegmentGap, "501..510 are missing")
	if evs := events(r); !strings.Contains(evs, "Warning SegmentGap stopped at revision 480: revisions 501..510 are missing") {
		t.Fatalf("events %q", evs)
	}

	// Promotion while the source advances: refused, still following, looked at again when the window ends.
	report.Stopped, report.Message, report.AppliedRevision, report.LagRevisions = "", "", 500, 0
	c.Spec.Standby.Promote = true
	if err := cl.Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	obs, _ = pass()
	standby(etcdv1alpha1.StandbyFollowing, metav1.ConditionFalse, etcdv1alpha1.ReasonSourceStillAdvancing, "promotion refused")
	if applier() == nil {
		t.Fatal("the applier was stopped while the source advances")
	}
	if evs := events(r); !strings.Contains(evs, "Warning SourceStillAdvancing") {
		t.Fatalf("events %q", evs)
	}
	if got := obs.standby.decision.RecheckAfter; got != defaultFencingWindow-time.Second {
		t.Fatalf("recheck after %s, want the rest of the window", got)
	}
	obs.standby.decision.RecheckAfter = 4 * time.Second
	if got := standbyRequeue(obs, 30*time.Second); got != 4*time.Second {
		t.Fatalf("requeue %s, want the end of the window when it comes before the next report", got)
	}

	// The source quiet for the window: the phase is recorded, then the applier deleted.
	now = now.Add(defaultFencingWindow)
	if _, err := pass(); err != nil {
		t.Fatal(err)
	}
	standby(etcdv1alpha1.StandbyPromoting, metav1.ConditionFalse, etcdv1alpha1.ReasonPromoting, "every complete segment is applied (revision 500)")
	if applier() != nil {
		t.Fatal("the applier was not deleted")
	}
	// Its Pod still going: the next pass waits and starts nothing again, even without a report.
	report = nil
	if _, err := pass(); err != nil {
		t.Fatal(err)
	}
	standby(etcdv1alpha1.StandbyPromoting, metav1.ConditionFalse, etcdv1alpha1.ReasonPromoting, "waiting for the applier to stop")
	if applier() != nil {
		t.Fatal("the applier was started again during the promotion")
	}
	// The Pod gone: the revision reached is read from etcd (none answers here, so the pass fails and retries).
	if err := cl.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace("ns")); err != nil {
		t.Fatal(err)
	}
	if _, err := pass(); err == nil || !strings.Contains(err.Error(), "no member answers") {
		t.Fatalf("recording the promotion without etcd: %v", err)
	}
	standby(etcdv1alpha1.StandbyPromoting, metav1.ConditionFalse, etcdv1alpha1.ReasonPromoting, "recording the revision")
	if applier() != nil {
		t.Fatal("the applier was started again during the promotion")
	}
}

// TestStandbyFencesAndPromotes (a real etcd member on loopback, holding a primary's role with readwrite access
// and a second user with the root role): the pass after the members formed fences writes, recording what it
// takes in the ConfigMap first, and reports no Following while it does; once promotion stopped the applier, the
// pass reads the revision reached from etcd, records it, and only then gives back what the fence took, deletes
// the record and declares the cluster promoted for good: no applier is started again.
func TestStandbyFencesAndPromotes(t *testing.T) {
	bin := testbed.NewestCachedEtcd(t, testing.Short())
	ctx := context.Background()
	url := testbed.StartLoopbackEtcd(t, bin, t.TempDir())
	ec, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ec.Close() }()
	var rev int64
	for i := range 5 {
		resp, err := ec.Put(ctx, fmt.Sprintf("k%d", i), "v")
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	primaryRole := []etcdauth.Permission{{Key: "/app/", RangeEnd: "/app0", Access: etcdauth.ReadWrite}}
	for _, step := range []func() error{
		func() error { _, err := ec.RoleAdd(ctx, "app"); return err },
		func() error {
			_, err := ec.RoleGrantPermission(ctx, "app", "/app/", "/app0", clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := ec.UserAdd(ctx, "ops", "pw"); return err },
		func() error { _, err := ec.UserGrantRole(ctx, "ops", etcdauth.RootRole); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	auth := func() ([]etcdauth.Permission, []string) {
		t.Helper()
		role, err := ec.RoleGet(ctx, "app")
		if err != nil {
			t.Fatal(err)
		}
		var perms []etcdauth.Permission
		for _, p := range role.Perm {
			perms = append(perms, etcdauth.Permission{Key: string(p.Key), RangeEnd: string(p.RangeEnd), Access: etcdauth.Access(p.PermType)})
		}
		user, err := ec.UserGet(ctx, "ops")
		if err != nil {
			t.Fatal(err)
		}
		return perms, user.Roles
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	c := standbyTestCluster()
	c.Status.Bootstrapped = true
	c.Status.Standby = &etcdv1alpha1.StandbyStatus{Phase: etcdv1alpha1.StandbyBootstrapping, SourceClusterID: "87afdd7b6dce50e8", AppliedRevision: rev}
	cl := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(c).WithStatusSubresource(&etcdv1alpha1.EtcdCluster{}).Build()
	rec := record.NewFakeRecorder(100)
	r := &Reconciler{Client: cl, Recorder: rec, Etcd: etcd.NewPool(), Options: testOpts, Now: func() time.Time { return now }}
	defer r.Etcd.Forget(client.ObjectKeyFromObject(c).String())
	pass := func() {
		t.Helper()
		obs := &observation{plan: plan.Observation{Bootstrapped: true}, endpoints: []string{url}}
		if err := r.reconcileStandby(ctx, c, obs); err != nil {
			t.Fatal(err)
		}
		r.statusStandby(c, obs)
	}

	// The fence: recorded, made, and no Following while it is made.
	pass()
	cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionStandby)
	if c.Status.Standby.Phase != etcdv1alpha1.StandbyBootstrapping || cond == nil || cond.Reason != etcdv1alpha1.ReasonFencingWrites {
		t.Fatalf("while fencing: %+v, %+v", c.Status.Standby, cond)
	}
	if perms, roles := auth(); !reflect.DeepEqual(perms, etcdauth.ReadOnly(primaryRole)) || len(roles) != 0 {
		t.Fatalf("fenced: role app %v, ops' roles %v", perms, roles)
	}
	fence := &corev1.ConfigMap{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "db-standby-fence"}, fence); err != nil {
		t.Fatal(err)
	}
	var recorded etcdauth.FenceRecord
	if err := json.Unmarshal([]byte(fence.Data[fenceRecordKey]), &recorded); err != nil || fence.Data[fenceStateKey] != fenceStateFenced ||
		!reflect.DeepEqual(recorded, etcdauth.FenceRecord{Roles: map[string][]etcdauth.Permission{"app": primaryRole}, RootOf: []string{"ops"}}) ||
		!metav1.IsControlledBy(fence, c) {
		t.Fatalf("fence record %+v (%v), state %q", recorded, err, fence.Data[fenceStateKey])
	}
	if evs := events(r); !strings.Contains(evs, "StandbyFenced") {
		t.Fatalf("events %q", evs)
	}
	// Fenced, the applier runs.
	pass()
	if err := cl.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "db-standby"}, &appsv1.Deployment{}); err != nil {
		t.Fatalf("the applier after the fence: %v", err)
	}

	// Promotion with the applier gone: the revision recorded, then writes opened.
	if err := cl.DeleteAllOf(ctx, &appsv1.Deployment{}, client.InNamespace("ns")); err != nil {
		t.Fatal(err)
	}
	c.Spec.Standby.Promote = true
	c.Status.Standby.Phase = etcdv1alpha1.StandbyPromoting
	for range 2 {
		pass()
	}
	st, cond := c.Status.Standby, meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionStandby)
	if st.Phase != etcdv1alpha1.StandbyPromoted || st.PromotedRevision != rev || st.PromotedTime == nil || cond == nil || cond.Reason != etcdv1alpha1.ReasonPromoted {
		t.Fatalf("after promotion: %+v, %+v (revision %d)", st, cond, rev)
	}
	if perms, roles := auth(); !reflect.DeepEqual(perms, primaryRole) || !reflect.DeepEqual(roles, []string{etcdauth.RootRole}) {
		t.Fatalf("after promotion: role app %v, ops' roles %v; want what the primary held", perms, roles)
	}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "db-standby-fence"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the fence record after promotion: %v", err)
	}
	if evs := events(r); strings.Count(evs, "StandbyPromoted") != 1 || !strings.Contains(evs, fmt.Sprintf("Promoted at revision %d", rev)) {
		t.Fatalf("events %q", evs)
	}
	var deps appsv1.DeploymentList
	if err := cl.List(ctx, &deps); err != nil || len(deps.Items) != 0 {
		t.Fatalf("deployments after promotion: %d, %v", len(deps.Items), err)
	}
}
