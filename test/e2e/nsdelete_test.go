package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/test/e2e/framework"
)

// namespaceGone bounds how long a namespace holding every kind of Steward's objects may take to go: well below
// the finalizers' own bounds (backup.DeletionGiveUpAfter, etcdauth.RemovalGiveUpAfter, 10 minutes), so that a
// finalizer that waits for what a namespace's deletion makes impossible, instead of giving up at once, fails here.
const namespaceGone = 2 * time.Minute

// populated is a namespace with one of each of Steward's kinds in it.
type populated struct {
	ns      string
	cluster *etcdv1alpha1.EtcdCluster
	// s3Key is the object of the one-shot backup (deletionPolicy Delete); volume the backup claim's volume, which
	// holds the schedule's snapshot and continuous backup's segments.
	s3Key, volume string
}

// populate creates, in ns: a 1-member cluster with auth on, an EtcdUser, the S3 credentials and a backup claim.
// The rest waits for the cluster (finishPopulating), so that two namespaces are built side by side.
func populate(t *testing.T, ns string) *populated {
	t.Helper()
	ctx := context.Background()
	framework.CreateS3Secret(t, ns)
	framework.CreateBackupClaim(t, ns, "256Mi")
	c := framework.NewCluster(ns, "db", 1)
	c.Spec.Auth = &etcdv1alpha1.AuthSpec{Enabled: true}
	if err := framework.K8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := framework.K8s.Create(ctx, framework.NewEtcdUser(ns, "app", c.Name, "/app/", etcdv1alpha1.AccessReadWrite, true)); err != nil {
		t.Fatal(err)
	}
	return &populated{ns: ns, cluster: c, s3Key: ns + "/oneshot.db"}
}

// finishPopulating waits for the cluster and the user, then adds: a schedule to the claim with continuous backup
// on (it takes a snapshot at once to start its window), a one-shot backup to S3 with deletionPolicy Delete, and a
// restore (of the healthy cluster, unconfirmed: it waits and touches nothing).
func finishPopulating(t *testing.T, p *populated) {
	t.Helper()
	ctx := context.Background()
	p.cluster = framework.WaitAvailable(t, client.ObjectKeyFromObject(p.cluster), 3*time.Minute)
	framework.WaitUserReady(t, client.ObjectKey{Namespace: p.ns, Name: "app"}, 2*time.Minute)
	s := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: "nightly"},
		Spec: etcdv1alpha1.EtcdBackupScheduleSpec{ClusterName: p.cluster.Name, Schedule: "@every 6h",
			Destination: etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "backups", Path: "db"}},
			Continuous:  &etcdv1alpha1.ContinuousBackup{Enabled: true, SegmentInterval: &metav1.Duration{Duration: time.Second}}}}
	if err := framework.K8s.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	b := framework.NewBackup(p.ns, "oneshot", p.cluster.Name, framework.S3Destination(p.s3Key))
	b.Spec.DeletionPolicy = etcdv1alpha1.DeletionPolicyDelete
	if err := framework.K8s.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	if b = framework.WaitBackupFinished(t, client.ObjectKeyFromObject(b), 2*time.Minute); !meta.IsStatusConditionTrue(b.Status.Conditions, etcdv1alpha1.ConditionComplete) {
		t.Fatalf("one-shot backup: %+v", b.Status.Conditions)
	}
	framework.WaitContinuous(t, client.ObjectKeyFromObject(s), "following with a window", func(s *etcdv1alpha1.EtcdBackupSchedule) bool {
		return s.Status.Continuous.RecoverableFrom != nil
	})
	rs := &etcdv1alpha1.EtcdRestore{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: "restore"},
		Spec: etcdv1alpha1.EtcdRestoreSpec{ClusterName: p.cluster.Name, BackupName: b.Name}}
	if err := framework.K8s.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	var pvc corev1.PersistentVolumeClaim
	if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: p.ns, Name: "backups"}, &pvc); err != nil {
		t.Fatal(err)
	}
	p.volume = pvc.Spec.VolumeName
	var backups etcdv1alpha1.EtcdBackupList
	if err := framework.K8s.List(ctx, &backups, client.InNamespace(p.ns)); err != nil {
		t.Fatal(err)
	}
	for _, b := range backups.Items {
		t.Logf("%s: EtcdBackup %s at %q, finalizers %v", p.ns, b.Name, b.Status.Location, b.Finalizers)
	}
}

// waitNamespaceGone waits for the namespace to disappear, by itself: nothing here removes a finalizer.
func waitNamespaceGone(t *testing.T, ns string, since time.Time) {
	t.Helper()
	framework.Poll(t, "namespace "+ns+" gone by itself", namespaceGone, func() error {
		err := framework.K8s.Get(context.Background(), client.ObjectKey{Name: ns}, &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("still there: %s", framework.LeftIn(context.Background(), ns))
	})
	t.Logf("namespace %s gone %.1fs after its deletion", ns, time.Since(since).Seconds())
}

// requireStorageAsDocumented checks what became of the stored snapshots, as docs/user/backups.md says: each is deleted
// or reported left behind in the operator's log (a namespace being deleted takes no Event), and the one-shot S3
// backup's object is still in the bucket only if it was reported (its credentials Secret went first); the
// schedule's snapshots and segments on the claim go with its volume (the test bed's storage class reclaims with
// Delete).
func requireStorageAsDocumented(t *testing.T, p *populated) {
	t.Helper()
	ctx := context.Background()
	location := "s3://" + framework.Bed.S3.Bucket + "/" + p.s3Key
	outcome := requireOutcome(t, p.ns, location)
	if keys := framework.S3Keys(t, p.s3Key); len(keys) > 0 {
		if outcome != leftBehindLog {
			t.Fatalf("%s is still in the bucket, and the operator logged %q", location, outcome)
		}
		if err := framework.S3Client(t).RemoveObject(ctx, framework.Bed.S3.Bucket, p.s3Key, minio.RemoveObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%s: %s: %s", p.ns, location, outcome)
	t.Logf("%s: the schedule's snapshot: %s", p.ns, requireOutcome(t, p.ns, "pvc://backups/db/"))
	framework.Poll(t, "backup volume "+p.volume+" reclaimed", time.Minute, func() error {
		var pv corev1.PersistentVolume
		if err := framework.K8s.Get(ctx, client.ObjectKey{Name: p.volume}, &pv); err == nil {
			return fmt.Errorf("volume %s %s", p.volume, pv.Status.Phase)
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	})
}

// The operator's log lines that say what became of a stored snapshot as its EtcdBackup went.
const (
	leftBehindLog = "Left a stored snapshot behind"
	deletedLog    = "Deleted the stored snapshot"
)

// requireOutcome finds the operator's log line that says what became of a snapshot of namespace ns at location
// (a prefix), and returns which it is.
func requireOutcome(t *testing.T, ns, location string) string {
	t.Helper()
	var found string
	framework.Poll(t, "what became of "+location, 10*time.Second, func() error {
		f, err := os.Open(filepath.Join(framework.Bed.StateDir(), "logs", "steward-e2e.log"))
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.Contains(line, `"`+ns+`"`) || !strings.Contains(line, location) {
				continue
			}
			for _, msg := range []string{leftBehindLog, deletedLog} {
				if strings.Contains(line, msg) {
					found = msg
					return nil
				}
			}
		}
		return fmt.Errorf("no line says %s of %s was deleted or left behind", location, ns)
	})
	return found
}

// TestNamespaceDeletion deletes namespaces that hold every kind of Steward's objects (a 1-member cluster with auth
// on and an EtcdUser, a schedule to a claim with continuous backup on that has taken its snapshot, a one-shot
// backup to S3 with deletionPolicy Delete, a waiting restore) under client load, and wants each gone by itself,
// with nothing of Steward's left and the stored snapshots deleted or reported as docs/user/backups.md says: once with
// Steward running, once with Steward stopped during the deletion and started again, and once with Steward gone for
// good, where the finalizers are removed by hand as docs/operations/install.md shows. The suite's own clean-up
// (DeleteNamespace) removes finalizers by hand; this test finishes before it and relies on nothing of it.
func TestNamespaceDeletion(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	home := framework.NewNamespace(t, "nsdel-home") // the operator's Lease, which must outlive the namespaces deleted
	running, stopped := framework.NewNamespace(t, "nsdel-running"), framework.NewNamespace(t, "nsdel-stopped")
	gone := framework.NewNamespace(t, "nsdel-gone")
	stop := framework.StartOperator(t, home, running, stopped, gone)
	worlds := []*populated{populate(t, running), populate(t, stopped), populate(t, gone)}
	for _, p := range worlds {
		finishPopulating(t, p)
	}

	t.Run("StewardRunning", func(t *testing.T) {
		p := worlds[0]
		load := framework.StartLoad(t, p.cluster)
		defer load.Stop()
		start := time.Now()
		if err := framework.K8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.ns}}); err != nil {
			t.Fatal(err)
		}
		waitNamespaceGone(t, p.ns, start)
		requireStorageAsDocumented(t, p)
	})

	// Steward stops here, for the two namespaces left: one gets it back, the other never does.
	t.Run("StewardStoppedDuringDeletion", func(t *testing.T) {
		p := worlds[1]
		load := framework.StartLoad(t, p.cluster)
		defer load.Stop()
		stop()
		start := time.Now()
		if err := framework.K8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.ns}}); err != nil {
			t.Fatal(err)
		}
		waitHeldByFinalizers(t, p.ns)
		restart := time.Now()
		framework.StartOperator(t, home, p.ns)
		waitNamespaceGone(t, p.ns, start)
		t.Logf("namespace %s gone %.1fs after Steward started again", p.ns, time.Since(restart).Seconds())
		requireStorageAsDocumented(t, p)
	})

	// Steward is uninstalled for good: the block of docs/operations/install.md that removes the finalizers by hand
	// lets the namespace go, and the snapshot the Delete-policy backup would have deleted stays in the bucket.
	t.Run("StewardGoneForGood", func(t *testing.T) {
		p := worlds[2]
		block := docBlockAfter(t, installPage, "If Steward is already gone for good")
		start := time.Now()
		if err := framework.K8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.ns}}); err != nil {
			t.Fatal(err)
		}
		waitHeldByFinalizers(t, p.ns)
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", block.text)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+tutorialKubeconfig(t, p.ns),
			"PATH="+filepath.Dir(framework.Bed.KubectlPath())+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s:%d: %v\n%s", installPage, block.line, err, out)
		}
		t.Logf("%s:%d:\n%s", installPage, block.line, indent("  ", string(out)))
		waitNamespaceGone(t, p.ns, start)
		if keys := framework.S3Keys(t, p.s3Key); len(keys) == 0 {
			t.Fatalf("s3://%s/%s is gone; without Steward nothing should have deleted it", framework.Bed.S3.Bucket, p.s3Key)
		}
		if err := framework.S3Client(t).RemoveObject(ctx, framework.Bed.S3.Bucket, p.s3Key, minio.RemoveObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	})
}

// installPage is the install guide, whose clean-up block StewardGoneForGood runs.
const installPage = "docs/operations/install.md"

// docBlockAfter returns the first ```sh block of page after the line that contains marker.
func docBlockAfter(t *testing.T, page, marker string) shellBlock {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(framework.RepoRoot(t), page))
	if err != nil {
		t.Fatal(err)
	}
	markerLine := 0
	for n, line := range strings.Split(string(text), "\n") {
		if strings.Contains(line, marker) {
			markerLine = n + 1
			break
		}
	}
	if markerLine == 0 {
		t.Fatalf("%s has no line %q", page, marker)
	}
	blocks, err := shellBlocks(string(text))
	if err != nil {
		t.Fatalf("%s: %v", page, err)
	}
	for _, b := range blocks {
		if b.line > markerLine {
			return b
		}
	}
	t.Fatalf("%s has no sh block after line %d (%q)", page, markerLine, marker)
	return shellBlock{}
}

// waitHeldByFinalizers waits, in a namespace being deleted without Steward, until what Steward's finalizers hold
// is all that is left: every backup and user is deleting and held, and the namespace's other content (the Pods)
// is gone.
func waitHeldByFinalizers(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	framework.Poll(t, "the namespace's deletion waiting for Steward's finalizers", time.Minute, func() error {
		var backups etcdv1alpha1.EtcdBackupList
		var users etcdv1alpha1.EtcdUserList
		if err := framework.K8s.List(ctx, &backups, client.InNamespace(ns)); err != nil {
			return err
		}
		if err := framework.K8s.List(ctx, &users, client.InNamespace(ns)); err != nil {
			return err
		}
		held := 0
		for _, b := range backups.Items {
			if !b.DeletionTimestamp.IsZero() && len(b.Finalizers) > 0 {
				held++
			}
		}
		for _, u := range users.Items {
			if !u.DeletionTimestamp.IsZero() && len(u.Finalizers) > 0 {
				held++
			}
		}
		var pods corev1.PodList
		if err := framework.K8s.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return err
		}
		if held < len(backups.Items)+len(users.Items) || held == 0 || len(pods.Items) > 0 {
			return fmt.Errorf("%d of %d backups and users held, %d Pods left", held, len(backups.Items)+len(users.Items), len(pods.Items))
		}
		return nil
	})
}
