package e2e

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/test/e2e/framework"
)

// TestStandbyFollowsAndPromotes: a primary under a steady writer, with continuous backup to S3; a standby in
// another namespace, sharing only the bucket (its own credentials Secret), seeds itself from the primary's newest
// snapshot, follows with its lag reported, and after the primary is deleted catches up with the source's last
// segment and is promoted there (forced: deleting the primary is the fencing): every write acknowledged up to the
// promoted revision is on it with the primary's revision, and it takes writes. An EtcdUser declared with write
// access is refused its writes by etcd while the standby follows (the write fence), reads, and writes once it is
// promoted.
func TestStandbyFollowsAndPromotes(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns, dr := framework.NewNamespace(t, "primary"), framework.NewNamespace(t, "standby")
	framework.StartOperator(t, ns, dr)
	framework.CreateS3Secret(t, ns)
	framework.CreateS3Secret(t, dr)
	src := framework.NewCluster(ns, "main", 1)
	if err := framework.K8s.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	src = framework.WaitSettled(t, client.ObjectKeyFromObject(src), 3*time.Minute)
	dest := framework.S3Destination(ns + "/main")
	sched := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "main"},
		Spec: etcdv1alpha1.EtcdBackupScheduleSpec{ClusterName: src.Name, Schedule: "@every 6h", Destination: dest,
			Continuous: &etcdv1alpha1.ContinuousBackup{Enabled: true, SegmentInterval: &metav1.Duration{Duration: time.Second}}}}
	if err := framework.K8s.Create(ctx, sched); err != nil {
		t.Fatal(err)
	}
	framework.WaitContinuous(t, client.ObjectKeyFromObject(sched), "following with a window", func(s *etcdv1alpha1.EtcdBackupSchedule) bool {
		return s.Status.Continuous.RecoverableFrom != nil
	})

	// A steady writer on the primary, recording each acknowledged write's revision.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{framework.ClientServiceURL(t, src)}, DialTimeout: 5 * time.Second, TLS: framework.ClusterTLS(t, src)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	var mu sync.Mutex
	acked := map[string]int64{}
	wctx, stopWriter := context.WithCancel(ctx)
	written := make(chan struct{})
	go func() {
		defer close(written)
		for i := 0; wctx.Err() == nil; i++ {
			k := fmt.Sprintf("w/%06d", i)
			rctx, cancel := context.WithTimeout(wctx, 5*time.Second)
			r, err := cli.Put(rctx, k, "v")
			cancel()
			if err == nil {
				mu.Lock()
				acked[k] = r.Header.Revision
				mu.Unlock()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	defer stopWriter()

	begin := time.Now()
	sb := framework.NewCluster(dr, "main", 1)
	sb.Spec.Auth = &etcdv1alpha1.AuthSpec{Enabled: true}
	sb.Spec.Standby = &etcdv1alpha1.StandbySpec{Source: etcdv1alpha1.StandbySource{ClusterName: "main", Destination: dest}}
	if err := framework.K8s.Create(ctx, sb); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(sb)
	// An application's identity on the standby, declared with write access: the fence gives it reads only.
	app := framework.NewEtcdUser(dr, "app", sb.Name, "w/", etcdv1alpha1.AccessReadWrite, false)
	if err := framework.K8s.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	following := waitStandby(t, key, "following, with its lag reported", 4*time.Minute, func(c *etcdv1alpha1.EtcdCluster) bool {
		return meta.IsStatusConditionTrue(c.Status.Conditions, etcdv1alpha1.ConditionStandby) && c.Status.Standby.AppliedRevision > 0 && c.Status.Standby.LastSegment != ""
	})
	st := following.Status.Standby
	t.Logf("standby following %.0fs after creation: applied revision %d of %d (%d revisions, %ds behind), last segment %s, following etcd cluster %s",
		time.Since(begin).Seconds(), st.AppliedRevision, st.SourceRevision, st.LagRevisions, st.LagSeconds, st.LastSegment, st.SourceClusterID)

	// Following: etcd refuses the application's write with its permission error, and serves its read.
	app = framework.WaitUserReady(t, client.ObjectKeyFromObject(app), time.Minute)
	appCli := framework.UserClient(t, following, app)
	wrctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = appCli.Put(wrctx, "w/app", "from the application")
	cancel()
	if !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Fatalf("the application's write to the following standby: %v, want etcd's %v", err, rpctypes.ErrPermissionDenied)
	}
	t.Logf("the application's write to the following standby refused by etcd: %v", err)
	framework.MayRead(t, "app", appCli, "w/000000", true)

	// The primary goes (its region is lost): the writer stops, the cluster and its schedule are deleted.
	time.Sleep(5 * time.Second)
	stopWriter()
	<-written
	if err := framework.K8s.Delete(ctx, sched); err != nil {
		t.Fatal(err)
	}
	if err := framework.K8s.Delete(ctx, src); err != nil {
		t.Fatal(err)
	}
	// The source's last segments (the follower stores what it holds when it stops) reach the standby: its source
	// revision has stopped moving and it has applied up to it. Status follows the applier's report every 10 s.
	deletedAt, lastSource, stableSince := time.Now(), int64(0), time.Now()
	caught := waitStandby(t, key, "caught up with the source's last segment", 2*time.Minute, func(c *etcdv1alpha1.EtcdCluster) bool {
		s := c.Status.Standby
		if s.SourceRevision != lastSource {
			lastSource, stableSince = s.SourceRevision, time.Now()
		}
		return time.Since(deletedAt) > 15*time.Second && time.Since(stableSince) > 15*time.Second && s.AppliedRevision == s.SourceRevision
	})
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Standby.Promote, c.Spec.Standby.ForcePromotion = true, true })
	promotedAt := time.Now()
	promoted := waitStandby(t, key, "promoted", 2*time.Minute, func(c *etcdv1alpha1.EtcdCluster) bool {
		return c.Status.Standby.Phase == etcdv1alpha1.StandbyPromoted
	})
	rev := promoted.Status.Standby.PromotedRevision
	t.Logf("promoted at revision %d in %.1fs (the source's last stored revision %d)", rev, time.Since(promotedAt).Seconds(), caught.Status.Standby.SourceRevision)
	if rev != caught.Status.Standby.SourceRevision {
		t.Fatalf("promoted at revision %d, not at the source's last stored revision %d", rev, caught.Status.Standby.SourceRevision)
	}

	// Every write acknowledged up to the promoted revision is there, at the primary's revision.
	states := keyStates(t, promoted, "w/", 0)
	mu.Lock()
	defer mu.Unlock()
	missing, after := 0, 0
	for k, r := range acked {
		if r > rev {
			after++
			continue
		}
		if got, want := states[k], fmt.Sprintf("v@c%d/m%d/v1", r, r); got != want {
			missing++
			if missing <= 5 {
				t.Errorf("acknowledged write %s at revision %d: on the promoted standby %q, want %q", k, r, got, want)
			}
		}
	}
	t.Logf("%d acknowledged writes, %d up to the promoted revision %d all present with their revisions, %d after it (never stored by the primary's follower)",
		len(acked), len(acked)-after, rev, after)
	if missing > 0 || len(acked)-after == 0 {
		t.Fatalf("%d acknowledged writes up to revision %d missing or changed", missing, rev)
	}
	// An ordinary cluster now: it takes writes, after the promoted revision.
	pcli, err := clientv3.New(clientv3.Config{Endpoints: []string{framework.ClientServiceURL(t, promoted)}, DialTimeout: 5 * time.Second, TLS: framework.ClusterTLS(t, promoted)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pcli.Close() }()
	framework.Poll(t, "write to the promoted cluster", time.Minute, func() error {
		r, err := pcli.Put(ctx, "after-promotion", "x")
		if err == nil && r.Header.Revision != rev+1 {
			return fmt.Errorf("the first write after promotion got revision %d, want %d", r.Header.Revision, rev+1)
		}
		return err
	})
	// The application's write, refused while a standby, goes through: its declared permissions are granted.
	framework.Poll(t, "the application's write to the promoted cluster", time.Minute, func() error {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := appCli.Put(wctx, "w/app", "from the application")
		return err
	})
	t.Logf("the application's write, refused while the standby followed, went through %.1fs after the promotion was recorded",
		time.Since(promoted.Status.Standby.PromotedTime.Time).Seconds())
}

// waitStandby waits until the standby's status satisfies ok.
func waitStandby(t *testing.T, key client.ObjectKey, what string, timeout time.Duration, ok func(*etcdv1alpha1.EtcdCluster) bool) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	var c etcdv1alpha1.EtcdCluster
	framework.Poll(t, "standby "+key.String()+": "+what, timeout, func() error {
		if err := framework.K8s.Get(context.Background(), key, &c); err != nil {
			return err
		}
		if c.Status.Standby == nil || !ok(&c) {
			return fmt.Errorf("status.standby %+v, Standby %+v; %s", c.Status.Standby, meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionStandby), framework.Describe(&c))
		}
		return nil
	})
	return &c
}
