package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/cmd/kubectl-steward/internal/report"
	"steward.dev/steward/internal/resources"
)

var now = time.Date(2026, 11, 23, 22, 15, 30, 0, time.UTC)

// kubeconfig writes a kubeconfig whose context's namespace is "ns" and points KUBECONFIG at it: commands resolve
// their namespace (and, for etcdctl, a REST config) from it without any API server.
func kubeconfig(t *testing.T) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: ctx, context: {cluster: c, user: u, namespace: ns}}]
current-context: ctx
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", path)
}

func newFake(t *testing.T, objs ...client.Object) client.WithWatch {
	t.Helper()
	s, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithStatusSubresource(&etcdv1alpha1.EtcdCluster{}, &etcdv1alpha1.EtcdBackup{}, &etcdv1alpha1.EtcdRestore{}).Build()
}

type result struct {
	stdout, stderr string
	code           int
}

// runtimeObject is an object the fake API server starts with.
type runtimeObject = client.Object

// run runs the plugin's command line against c, as the binary would.
func run(t *testing.T, c client.WithWatch, args ...string) result {
	t.Helper()
	return runWith(t, c, nil, args...)
}

// runWith is run with the options changed by change first.
func runWith(t *testing.T, c client.WithWatch, change func(*Options), args ...string) result {
	t.Helper()
	kubeconfig(t)
	var out, errOut bytes.Buffer
	o := NewOptions(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	o.Flags = genericclioptions.NewConfigFlags(false)
	o.Now = func() time.Time { return now }
	o.Resync = 50 * time.Millisecond
	o.NewClient = func() (client.WithWatch, error) {
		if c == nil {
			return nil, errors.New("no API calls expected")
		}
		return c, nil
	}
	if change != nil {
		change(o)
	}
	code := Run(context.Background(), o, args)
	return result{out.String(), errOut.String(), code}
}

func testCluster() *etcdv1alpha1.EtcdCluster {
	return &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"},
		Spec:       etcdv1alpha1.EtcdClusterSpec{Replicas: 3, Version: "3.6.16"},
		Status: etcdv1alpha1.EtcdClusterStatus{ReadyReplicas: 1, Leader: "db-aaaaa", ClientEndpoint: "https://db.ns.svc.cluster.local:2379",
			Members: []etcdv1alpha1.MemberStatus{{Name: "db-aaaaa", ID: "8e9e05c52164694d", Role: etcdv1alpha1.RoleLeader, Version: "3.6.16", Healthy: true}},
			TLS:     &etcdv1alpha1.TLSStatus{ClientSecret: "db-client"}},
	}
}

func memberPod(name string, tls bool) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns",
			Labels: map[string]string{resources.LabelCluster: "db", resources.LabelMember: name}},
		Spec: corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	if tls {
		p.Annotations = map[string]string{resources.AnnotationTLS: etcdv1alpha1.TLSProviderSteward}
	}
	return p
}

func TestStatusCommand(t *testing.T) {
	c := newFake(t, testCluster(), memberPod("db-aaaaa", true))
	r := run(t, c, "status", "db")
	if r.code != ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"Cluster:         ns/db", "db-aaaaa  8e9e05c52164694d  Leader", "Ready", "node-1"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, r.stdout)
		}
	}

	r = run(t, c, "status", "db", "-o", "json", "-n", "ns")
	var s report.Status
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil || r.code != ExitOK {
		t.Fatalf("-o json: exit %d, %v:\n%s", r.code, err, r.stdout)
	}
	if s.Name != "db" || len(s.Members) != 1 || s.Members[0].Pod != "Ready" || s.Leader != "db-aaaaa" {
		t.Errorf("json status %+v", s)
	}
	r = run(t, c, "status", "db", "-o", "yaml")
	if err := yaml.Unmarshal([]byte(r.stdout), &s); err != nil || s.Name != "db" {
		t.Errorf("-o yaml: %v:\n%s", err, r.stdout)
	}

	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"unknown cluster":  {[]string{"status", "nope"}, `no EtcdCluster "nope" in namespace "ns"`},
		"other namespace":  {[]string{"status", "db", "-n", "prod"}, `no EtcdCluster "db" in namespace "prod"`},
		"bad output":       {[]string{"status", "db", "-o", "wide"}, `unknown output format "wide"`},
		"missing argument": {[]string{"status"}, "accepts 1 arg(s)"},
	} {
		r := run(t, c, tc.args...)
		if r.code != ExitError || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q, want 1 and %q", name, r.code, r.stderr, tc.want)
		}
	}
}

// finish plays Steward: once obj appears, it sets conditions on it (through the status subresource).
func finish(t *testing.T, c client.WithWatch, obj client.Object, set func(client.Object)) {
	t.Helper()
	go func() {
		key := client.ObjectKeyFromObject(obj)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if err := c.Get(context.Background(), key, obj); err == nil {
				set(obj)
				if err := c.Status().Update(context.Background(), obj); err != nil {
					t.Errorf("update status: %v", err)
				}
				return
			} else if !apierrors.IsNotFound(err) {
				t.Errorf("get: %v", err)
				return
			}
		}
		t.Errorf("%s was never created", key)
	}()
}

func conditions(complete, failed metav1.ConditionStatus, reason, msg string) []metav1.Condition {
	return []metav1.Condition{
		{Type: etcdv1alpha1.ConditionComplete, Status: complete, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(now)},
		{Type: etcdv1alpha1.ConditionFailed, Status: failed, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(now)},
	}
}

func TestBackupCommand(t *testing.T) {
	schedule := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "ns"},
		Spec: etcdv1alpha1.EtcdBackupScheduleSpec{ClusterName: "db", Schedule: "@daily",
			Destination: etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "backups", Path: "etcd"}}}}
	const name = "db-20261123t221530z"

	t.Run("complete, to the schedule's destination", func(t *testing.T) {
		c := newFake(t, testCluster(), schedule)
		finish(t, c, &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}, func(o client.Object) {
			b := o.(*etcdv1alpha1.EtcdBackup)
			b.Status.Conditions = conditions(metav1.ConditionTrue, metav1.ConditionFalse, "Succeeded", "stored")
			b.Status.Location, b.Status.SizeBytes, b.Status.Revision = "pvc://backups/etcd/db.db", 2048, 7
		})
		r := run(t, c, "backup", "db")
		if r.code != ExitOK {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		for _, want := range []string{"Using the destination of EtcdBackupSchedule nightly", "etcdbackup.etcd.steward.dev/" + name + " created",
			"phase Complete", "Complete=True (Succeeded): stored", "etcdbackup/" + name + " complete, at pvc://backups/etcd/db.db, 2.0 KiB, revision 7"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("output lacks %q:\n%s", want, r.stdout)
			}
		}
		var b etcdv1alpha1.EtcdBackup
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, &b); err != nil {
			t.Fatal(err)
		}
		if b.Spec.ClusterName != "db" || b.Spec.Destination.PVC.Path != "etcd/db-20261123T221530Z.db" {
			t.Errorf("created %+v", b.Spec)
		}
	})

	t.Run("failed, -o json", func(t *testing.T) {
		c := newFake(t, testCluster())
		finish(t, c, &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "b1", Namespace: "ns"}}, func(o client.Object) {
			o.(*etcdv1alpha1.EtcdBackup).Status.Conditions = conditions(metav1.ConditionFalse, metav1.ConditionTrue, "DestinationNotFound", "PVC backups not found")
		})
		r := run(t, c, "backup", "db", "--name", "b1", "--pvc", "backups/x.db", "-o", "json")
		if r.code != ExitError || !strings.Contains(r.stderr, "EtcdBackup ns/b1 failed: DestinationNotFound: PVC backups not found") {
			t.Errorf("exit %d, stderr %s", r.code, r.stderr)
		}
		var b etcdv1alpha1.EtcdBackup
		if err := json.Unmarshal([]byte(r.stdout), &b); err != nil || b.Name != "b1" || b.Kind != "EtcdBackup" {
			t.Errorf("stdout is not the EtcdBackup: %v\n%s", err, r.stdout)
		}
		if !strings.Contains(r.stderr, "phase Failed") {
			t.Errorf("progress is not on stderr with -o json: %s", r.stderr)
		}
	})

	t.Run("timed out", func(t *testing.T) {
		c := newFake(t, testCluster())
		r := run(t, c, "backup", "db", "--name", "b2", "--pvc", "backups/", "--timeout", "300ms")
		if r.code != ExitTimeout || !strings.Contains(r.stderr, "timed out waiting 300ms for EtcdBackup ns/b2 (phase Pending); it carries on") {
			t.Errorf("exit %d, stderr %s", r.code, r.stderr)
		}
	})

	t.Run("no wait", func(t *testing.T) {
		c := newFake(t, testCluster())
		r := run(t, c, "backup", "db", "--name", "b3", "--s3", "s3://bucket/p/", "--s3-endpoint", "s3:9000", "--s3-credentials-secret", "creds", "--wait=false")
		if r.code != ExitOK || !strings.Contains(r.stdout, "b3 created") {
			t.Errorf("exit %d, %s %s", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("stored like the schedule's backups unless told", func(t *testing.T) {
		encrypted := schedule.DeepCopy()
		encrypted.Spec.Compression = etcdv1alpha1.CompressionNone
		encrypted.Spec.Encryption = &etcdv1alpha1.BackupEncryption{KeySecret: etcdv1alpha1.SecretReference{Name: "sched-key"}}
		c := newFake(t, testCluster(), encrypted)
		for args, want := range map[string]string{ //nolint:gosec // Secret names, not credentials
			"backup db --name s1 --dry-run -o json":                                                 "None/sched-key",
			"backup db --name s2 --dry-run -o json --compression Zstd --encryption-key-secret mine": "Zstd/mine",
			"backup db --name s3 --dry-run -o json --pvc backups/ --encryption-key-secret mine":     "/mine",
			"backup db --name s4 --dry-run -o json --pvc backups/":                                  "/",
		} {
			r := run(t, c, strings.Fields(args)...)
			var b etcdv1alpha1.EtcdBackup
			if err := json.Unmarshal([]byte(r.stdout), &b); err != nil || r.code != ExitOK {
				t.Fatalf("%s: exit %d, %v: %s %s", args, r.code, err, r.stdout, r.stderr)
			}
			got := string(b.Spec.Compression) + "/"
			if b.Spec.Encryption != nil {
				got += b.Spec.Encryption.KeySecret.Name
			}
			if got != want {
				t.Errorf("%s: stored as %s, want %s", args, got, want)
			}
		}
	})

	t.Run("dry run creates nothing", func(t *testing.T) {
		c := newFake(t, testCluster())
		r := run(t, c, "backup", "db", "--name", "b4", "--pvc", "backups/", "--dry-run")
		var b etcdv1alpha1.EtcdBackup
		if err := yaml.Unmarshal([]byte(r.stdout), &b); err != nil || r.code != ExitOK || b.Spec.Destination.PVC.ClaimName != "backups" || b.APIVersion != "etcd.steward.dev/v1alpha1" {
			t.Errorf("exit %d, %v:\n%s", r.code, err, r.stdout)
		}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "b4"}, &b); !apierrors.IsNotFound(err) {
			t.Errorf("dry run created the backup: %v", err)
		}
	})

	for name, tc := range map[string]struct {
		objs []client.Object
		args []string
		want string
	}{
		"no destination, no schedule": {[]client.Object{testCluster()}, []string{"backup", "db"}, "has no EtcdBackupSchedule"},
		"unknown source":              {[]client.Object{testCluster()}, []string{"backup", "db", "--destination-from", "x"}, `no EtcdBackup or EtcdBackupSchedule "x"`},
		"unknown cluster":             {nil, []string{"backup", "db", "--pvc", "b/"}, `no EtcdCluster "db"`},
		"bad policy":                  {[]client.Object{testCluster()}, []string{"backup", "db", "--pvc", "b/", "--deletion-policy", "Keep"}, "Retain or Delete"},
		"bad compression":             {[]client.Object{testCluster()}, []string{"backup", "db", "--pvc", "b/", "--compression", "gzip"}, "Zstd or None"},
	} {
		r := run(t, newFake(t, tc.objs...), tc.args...)
		if r.code != ExitError || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q, want %q", name, r.code, r.stderr, tc.want)
		}
	}
}

func TestDestinationFrom(t *testing.T) {
	backup := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns"}, Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: "db",
		Destination: etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "b", Path: "d/x.db"}}}}
	schedule := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns"}, Spec: etcdv1alpha1.EtcdBackupScheduleSpec{ClusterName: "db",
		Destination: etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "s", Path: "sched"}}}}
	other := schedule.DeepCopy()
	other.Name = "y"
	c := newFake(t, backup, schedule, other)
	ctx := context.Background()
	if _, _, _, err := destinationFrom(ctx, c, "ns", "db", "x"); err == nil || !strings.Contains(err.Error(), "both etcdbackup/x and etcdbackupschedule/x exist") {
		t.Errorf("ambiguous: %v", err)
	}
	if d, kind, _, err := destinationFrom(ctx, c, "ns", "db", "etcdbackup/x"); err != nil || kind != "EtcdBackup" || d.PVC.ClaimName != "b" {
		t.Errorf("etcdbackup/x: %v %s %v", d, kind, err)
	}
	if d, kind, _, err := destinationFrom(ctx, c, "ns", "db", "EtcdBackupSchedule/x"); err != nil || kind != "EtcdBackupSchedule" || d.PVC.ClaimName != "s" {
		t.Errorf("EtcdBackupSchedule/x: %v %s %v", d, kind, err)
	}
	if _, _, _, err := destinationFrom(ctx, c, "ns", "db", ""); err == nil || !strings.Contains(err.Error(), "several EtcdBackupSchedules (x, y)") {
		t.Errorf("two schedules: %v", err)
	}
	if _, _, _, err := destinationFrom(ctx, c, "ns", "db", "pod/x"); err == nil || !strings.Contains(err.Error(), "the kind is etcdbackup or etcdbackupschedule") {
		t.Errorf("wrong kind: %v", err)
	}
}

func TestRestoreCommand(t *testing.T) {
	backup := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "db-1", Namespace: "ns"},
		Spec:   etcdv1alpha1.EtcdBackupSpec{ClusterName: "db"},
		Status: etcdv1alpha1.EtcdBackupStatus{EtcdVersion: "3.6.16"}}

	t.Run("a re-seed without confirmation is refused before any request", func(t *testing.T) {
		r := run(t, nil, "restore", "db", "--backup", "db-1", "--reseed")
		if r.code != ExitError || !strings.Contains(r.stderr, "refusing to re-seed cluster db with no --confirm") || !strings.Contains(r.stderr, "To confirm, pass --confirm db") {
			t.Errorf("exit %d, stderr %s", r.code, r.stderr)
		}
		r = run(t, nil, "restore", "db", "--backup", "db-1", "--reseed", "--confirm", "prod")
		if r.code != ExitError || !strings.Contains(r.stderr, "with --confirm prod") {
			t.Errorf("exit %d, stderr %s", r.code, r.stderr)
		}
	})

	t.Run("re-seed", func(t *testing.T) {
		c := newFake(t, testCluster(), backup)
		name := "db-restore-20261123t221530z"
		finish(t, c, &etcdv1alpha1.EtcdRestore{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}, func(o client.Object) {
			rs := o.(*etcdv1alpha1.EtcdRestore)
			rs.Status.Conditions = append(conditions(metav1.ConditionTrue, metav1.ConditionFalse, "Succeeded", "restored"),
				metav1.Condition{Type: etcdv1alpha1.ConditionVerified, Status: metav1.ConditionTrue, Reason: "Verified", LastTransitionTime: metav1.NewTime(now)})
			rs.Status.Mode, rs.Status.Members = etcdv1alpha1.RestoreReseed, []string{"db-x"}
		})
		r := run(t, c, "restore", "db", "--backup", "db-1", "--reseed", "--confirm", "db")
		if r.code != ExitOK {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		for _, want := range []string{"etcdrestore.etcd.steward.dev/" + name + " created", "Verified=True", "etcdrestore/" + name + " complete: cluster db restored from backup db-1, mode Reseed"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("output lacks %q:\n%s", want, r.stdout)
			}
		}
		var rs etcdv1alpha1.EtcdRestore
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, &rs); err != nil || rs.Spec.Confirm != "db" {
			t.Errorf("restore %+v, %v", rs.Spec, err)
		}
	})

	t.Run("new cluster", func(t *testing.T) {
		c := newFake(t, testCluster(), backup)
		// Steward creates the restore of a cluster bootstrapped from a backup; here the test does, a moment later.
		go func() {
			time.Sleep(100 * time.Millisecond)
			rs := &etcdv1alpha1.EtcdRestore{ObjectMeta: metav1.ObjectMeta{Name: "copy-from-backup", Namespace: "ns"},
				Spec: etcdv1alpha1.EtcdRestoreSpec{ClusterName: "copy", BackupName: "db-1"}}
			if err := c.Create(context.Background(), rs); err != nil {
				t.Error(err)
			}
		}()
		finish(t, c, &etcdv1alpha1.EtcdRestore{ObjectMeta: metav1.ObjectMeta{Name: "copy-from-backup", Namespace: "ns"}}, func(o client.Object) {
			o.(*etcdv1alpha1.EtcdRestore).Status.Conditions = conditions(metav1.ConditionTrue, metav1.ConditionFalse, "Succeeded", "")
		})
		r := run(t, c, "restore", "db", "--backup", "db-1", "--new-cluster", "copy", "--replicas", "1")
		if r.code != ExitOK {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		if !strings.Contains(r.stdout, "etcdcluster.etcd.steward.dev/copy created") || !strings.Contains(r.stdout, "etcdrestore/copy-from-backup complete") {
			t.Errorf("output:\n%s", r.stdout)
		}
		var cl etcdv1alpha1.EtcdCluster
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "copy"}, &cl); err != nil {
			t.Fatal(err)
		}
		if cl.Spec.Bootstrap.FromBackup.BackupName != "db-1" || cl.Spec.Replicas != 1 || cl.Spec.Version != "3.6.16" {
			t.Errorf("new cluster %+v", cl.Spec)
		}
	})

	t.Run("re-seed to a time of a schedule's continuous backup", func(t *testing.T) {
		sched := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "ns"},
			Spec: etcdv1alpha1.EtcdBackupScheduleSpec{ClusterName: "db", Continuous: &etcdv1alpha1.ContinuousBackup{Enabled: true}}}
		c := newFake(t, testCluster(), sched)
		finish(t, c, &etcdv1alpha1.EtcdRestore{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns"}}, func(o client.Object) {
			o.(*etcdv1alpha1.EtcdRestore).Status.Conditions = conditions(metav1.ConditionTrue, metav1.ConditionFalse, "Succeeded", "")
		})
		r := run(t, c, "restore", "db", "--from-schedule", "nightly", "--to-time", "2026-11-25T14:03:00Z", "--reseed", "--confirm", "db", "--name", "r")
		if r.code != ExitOK {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		var rs etcdv1alpha1.EtcdRestore
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "r"}, &rs); err != nil || rs.Spec.BackupName != "" ||
			rs.Spec.PointInTime == nil || rs.Spec.PointInTime.ScheduleName != "nightly" || rs.Spec.PointInTime.Time != "2026-11-25T14:03:00Z" {
			t.Errorf("restore %+v, %v", rs.Spec, err)
		}
		plain := sched.DeepCopy()
		plain.Spec.Continuous = nil
		r = run(t, newFake(t, testCluster(), plain), "restore", "db", "--from-schedule", "nightly", "--reseed", "--confirm", "db")
		if r.code != ExitError || !strings.Contains(r.stderr, "has no continuous backup") {
			t.Errorf("schedule without continuous backup: exit %d, stderr %s", r.code, r.stderr)
		}
	})

	t.Run("failed", func(t *testing.T) {
		c := newFake(t, testCluster(), backup)
		finish(t, c, &etcdv1alpha1.EtcdRestore{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns"}}, func(o client.Object) {
			o.(*etcdv1alpha1.EtcdRestore).Status.Conditions = conditions(metav1.ConditionFalse, metav1.ConditionTrue, "ClusterHasQuorum", "db has quorum")
		})
		r := run(t, c, "restore", "db", "--backup", "db-1", "--reseed", "--confirm", "db", "--name", "r")
		if r.code != ExitError || !strings.Contains(r.stderr, "EtcdRestore ns/r failed: ClusterHasQuorum: db has quorum") {
			t.Errorf("exit %d, stderr %s", r.code, r.stderr)
		}
	})

	t.Run("timeout before Steward creates the restore", func(t *testing.T) {
		c := newFake(t, testCluster(), backup)
		r := run(t, c, "restore", "db", "--backup", "db-1", "--new-cluster", "copy", "--timeout", "200ms")
		if r.code != ExitTimeout || !strings.Contains(r.stdout, "waiting for Steward to create etcdrestore/copy-from-backup") ||
			!strings.Contains(r.stderr, "(not created yet)") {
			t.Errorf("exit %d, stdout %s, stderr %s", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("unknown backup", func(t *testing.T) {
		r := run(t, newFake(t, testCluster()), "restore", "db", "--backup", "nope", "--new-cluster", "copy")
		if r.code != ExitError || !strings.Contains(r.stderr, `no EtcdBackup "nope"`) {
			t.Errorf("exit %d, stderr %s", r.code, r.stderr)
		}
	})
}

func TestPauseResume(t *testing.T) {
	c := newFake(t, testCluster())
	paused := func() bool {
		var cl etcdv1alpha1.EtcdCluster
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "db"}, &cl); err != nil {
			t.Fatal(err)
		}
		return cl.Spec.Paused
	}
	steps := []struct {
		cmd, want string
		paused    bool
	}{
		{"pause", "etcdcluster.etcd.steward.dev/db paused", true},
		{"pause", "etcdcluster.etcd.steward.dev/db already paused", true},
		{"resume", "etcdcluster.etcd.steward.dev/db resumed", false},
		{"resume", "etcdcluster.etcd.steward.dev/db already resumed", false},
	}
	for _, s := range steps {
		r := run(t, c, s.cmd, "db")
		if r.code != ExitOK || strings.TrimSpace(r.stdout) != s.want || paused() != s.paused {
			t.Errorf("%s: exit %d, %q (%s), paused %v", s.cmd, r.code, r.stdout, r.stderr, paused())
		}
	}
	r := run(t, c, "pause", "db", "-o", "yaml")
	var cl etcdv1alpha1.EtcdCluster
	if err := yaml.Unmarshal([]byte(r.stdout), &cl); err != nil || !cl.Spec.Paused || cl.Kind != "EtcdCluster" || !strings.Contains(r.stderr, "paused") {
		t.Errorf("-o yaml: %v\n%s", err, r.stdout)
	}
}

func TestCompletion(t *testing.T) {
	other := testCluster()
	other.Name = "dbx"
	elsewhere := testCluster()
	elsewhere.Name, elsewhere.Namespace = "db-prod", "prod"
	c := newFake(t, testCluster(), other, elsewhere)
	r := run(t, c, "__complete", "status", "d")
	if r.code != ExitOK || !strings.HasPrefix(r.stdout, "db\ndbx\n:4\n") {
		t.Errorf("completion: exit %d, %q", r.code, r.stdout)
	}
	r = run(t, c, "__complete", "etcdctl", "db", "")
	if strings.Contains(r.stdout, "dbx") {
		t.Errorf("completed a second cluster argument: %q", r.stdout)
	}
}

// hibernation is a status.hibernation of the test cluster.
func hibernation(phase etcdv1alpha1.HibernationPhase) *etcdv1alpha1.HibernationStatus {
	return &etcdv1alpha1.HibernationStatus{Phase: phase, Since: metav1.NewTime(now.Add(-time.Hour)),
		Members: []string{"db-aaaaa"}, DataSizeBytes: 2 << 20, Revision: 1234}
}

// hibernatedCluster is the test cluster asked to hibernate, with status.hibernation in phase (none when empty).
func hibernatedCluster(phase etcdv1alpha1.HibernationPhase) *etcdv1alpha1.EtcdCluster {
	c := testCluster()
	c.Spec.Hibernation = &etcdv1alpha1.Hibernation{Enabled: true}
	if phase != "" {
		c.Status.Hibernation = hibernation(phase)
	}
	return c
}

// playSteward plays Steward for a wait: once ready holds for the cluster, it writes each status change in turn
// through the status subresource.
func playSteward(t *testing.T, c client.WithWatch, ready func(*etcdv1alpha1.EtcdCluster) bool, changes ...func(*etcdv1alpha1.EtcdClusterStatus)) {
	t.Helper()
	go func() {
		key := client.ObjectKey{Namespace: "ns", Name: "db"}
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			var cl etcdv1alpha1.EtcdCluster
			if err := c.Get(context.Background(), key, &cl); err != nil {
				t.Errorf("get: %v", err)
				return
			}
			if !ready(&cl) {
				continue
			}
			for _, change := range changes {
				change(&cl.Status)
				if err := c.Status().Update(context.Background(), &cl); err != nil {
					t.Errorf("update status: %v", err)
					return
				}
			}
			return
		}
		t.Errorf("the command never patched the cluster")
	}()
}

func readCluster(t *testing.T, c client.Client) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	var cl etcdv1alpha1.EtcdCluster
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "db"}, &cl); err != nil {
		t.Fatal(err)
	}
	return &cl
}

func TestHibernateRefusals(t *testing.T) {
	ephemeral := testCluster()
	ephemeral.Spec.Storage.Ephemeral = true
	paused := testCluster()
	paused.Spec.Paused = true
	for name, tc := range map[string]struct {
		cluster *etcdv1alpha1.EtcdCluster
		want    string
	}{
		"ephemeral":              {ephemeral, "cluster db has ephemeral storage (spec.storage.ephemeral)"},
		"hibernated":             {hibernatedCluster(etcdv1alpha1.HibernationHibernated), "cluster db is already hibernated (status.hibernation.phase Hibernated since 2026-11-23T21:15:30Z)"},
		"hibernating":            {hibernatedCluster(etcdv1alpha1.HibernationHibernating), "cluster db is already hibernating (status.hibernation.phase Hibernating"},
		"asked, no phase yet":    {hibernatedCluster(""), "cluster db is already asked to hibernate (spec.hibernation.enabled)"},
		"paused":                 {paused, "cluster db is paused (spec.paused)"},
		"enabled while resuming": {hibernatedCluster(etcdv1alpha1.HibernationResuming), "already hibernating (status.hibernation.phase Resuming"},
	} {
		c := newFake(t, tc.cluster)
		before := readCluster(t, c)
		r := run(t, c, "hibernate", "db")
		if r.code != ExitError || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q, want 1 and %q", name, r.code, r.stderr, tc.want)
		}
		if after := readCluster(t, c); after.ResourceVersion != before.ResourceVersion {
			t.Errorf("%s: the refused hibernate patched the cluster", name)
		}
	}
	r := run(t, newFake(t), "hibernate", "db")
	if r.code != ExitError || !strings.Contains(r.stderr, `no EtcdCluster "db" in namespace "ns"`) {
		t.Errorf("unknown cluster: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestHibernateResume(t *testing.T) {
	requested := func(cl *etcdv1alpha1.EtcdCluster) *bool {
		if cl.Spec.Hibernation == nil {
			return nil
		}
		return &cl.Spec.Hibernation.Enabled
	}

	t.Run("hibernate, then resume, without waiting", func(t *testing.T) {
		c := newFake(t, testCluster())
		r := run(t, c, "hibernate", "db")
		if r.code != ExitOK {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		for _, want := range []string{"etcdcluster.etcd.steward.dev/db hibernating\n", "one at a time, the leader last", "keeps their volumes",
			"backups pause", "Bring it back: kubectl steward resume db -n ns"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("hibernate output lacks %q:\n%s", want, r.stdout)
			}
		}
		if e := requested(readCluster(t, c)); e == nil || !*e {
			t.Fatalf("spec.hibernation.enabled %v after hibernate", e)
		}
		r = run(t, c, "resume", "db")
		if r.code != ExitOK || !strings.HasPrefix(r.stdout, "etcdcluster.etcd.steward.dev/db resuming from hibernation\n") ||
			!strings.Contains(r.stdout, "status.hibernation.phase is Resuming until condition Available is True") {
			t.Errorf("resume: exit %d, %s %s", r.code, r.stdout, r.stderr)
		}
		if cl := readCluster(t, c); requested(cl) == nil || *requested(cl) || cl.Spec.Paused {
			t.Errorf("spec after resume %+v", cl.Spec)
		}
		r = run(t, c, "resume", "db")
		if r.code != ExitOK || strings.TrimSpace(r.stdout) != "etcdcluster.etcd.steward.dev/db already resumed" {
			t.Errorf("resume again: exit %d, %q", r.code, r.stdout)
		}
	})

	t.Run("resume of a paused, hibernated cluster undoes both", func(t *testing.T) {
		cl := hibernatedCluster(etcdv1alpha1.HibernationHibernated)
		cl.Spec.Paused = true
		c := newFake(t, cl)
		r := run(t, c, "resume", "db")
		if r.code != ExitOK || !strings.HasPrefix(r.stdout, "etcdcluster.etcd.steward.dev/db resumed\netcdcluster.etcd.steward.dev/db resuming from hibernation\n") {
			t.Errorf("exit %d, %q", r.code, r.stdout)
		}
		if cl := readCluster(t, c); cl.Spec.Paused || *requested(cl) {
			t.Errorf("spec after resume %+v", cl.Spec)
		}
	})

	t.Run("resume while resuming", func(t *testing.T) {
		cl := testCluster()
		cl.Status.Hibernation = hibernation(etcdv1alpha1.HibernationResuming)
		r := run(t, newFake(t, cl), "resume", "db")
		if r.code != ExitOK || strings.TrimSpace(r.stdout) != "etcdcluster.etcd.steward.dev/db already resuming from hibernation (status.hibernation.phase Resuming)" {
			t.Errorf("exit %d, %q", r.code, r.stdout)
		}
	})

	t.Run("hibernate --wait", func(t *testing.T) {
		c := newFake(t, testCluster())
		playSteward(t, c, etcdv1alpha1.HibernationRequested,
			func(s *etcdv1alpha1.EtcdClusterStatus) {
				s.Hibernation = hibernation(etcdv1alpha1.HibernationHibernating)
			},
			func(s *etcdv1alpha1.EtcdClusterStatus) {
				s.Hibernation = hibernation(etcdv1alpha1.HibernationHibernated)
			})
		r := run(t, c, "hibernate", "db", "--wait")
		if r.code != ExitOK {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		for _, want := range []string{"] phase Hibernated\n", "etcdcluster/db hibernated, volumes kept: db-aaaaa, data 2.0 MiB, revision 1234\n"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("output lacks %q:\n%s", want, r.stdout)
			}
		}
	})

	t.Run("resume --wait -o json", func(t *testing.T) {
		c := newFake(t, hibernatedCluster(etcdv1alpha1.HibernationHibernated))
		playSteward(t, c, func(cl *etcdv1alpha1.EtcdCluster) bool { return !etcdv1alpha1.HibernationRequested(cl) },
			func(s *etcdv1alpha1.EtcdClusterStatus) { s.Hibernation.Phase = etcdv1alpha1.HibernationResuming },
			func(s *etcdv1alpha1.EtcdClusterStatus) {
				s.Hibernation = nil
				s.Conditions = []metav1.Condition{{Type: etcdv1alpha1.ConditionAvailable, Status: metav1.ConditionTrue,
					Reason: etcdv1alpha1.ReasonQuorumAvailable, Message: "3 of 3 voting members healthy", LastTransitionTime: metav1.NewTime(now)}}
			})
		r := run(t, c, "resume", "db", "--wait", "-o", "json")
		if r.code != ExitOK {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		var cl etcdv1alpha1.EtcdCluster
		if err := json.Unmarshal([]byte(r.stdout), &cl); err != nil || cl.Kind != "EtcdCluster" || cl.Status.Hibernation != nil {
			t.Errorf("stdout is not the resumed cluster: %v\n%s", err, r.stdout)
		}
		for _, want := range []string{"resuming from hibernation", "Available=True (QuorumAvailable)", "etcdcluster/db resumed and Available: 3 of 3 voting members healthy"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
			}
		}
	})

	t.Run("hibernate --wait times out", func(t *testing.T) {
		r := run(t, newFake(t, testCluster()), "hibernate", "db", "--wait", "--timeout", "300ms")
		if r.code != ExitTimeout || !strings.Contains(r.stderr, "timed out waiting 300ms for EtcdCluster ns/db to hibernate (no phase yet: Steward has not begun") ||
			!strings.Contains(r.stderr, "Steward carries on: kubectl steward status db -n ns") {
			t.Errorf("exit %d, stderr %s", r.code, r.stderr)
		}
	})
}

func TestHibernationWaitEnds(t *testing.T) {
	available := []metav1.Condition{{Type: etcdv1alpha1.ConditionAvailable, Status: metav1.ConditionTrue}}
	for name, tc := range map[string]struct {
		cluster    *etcdv1alpha1.EtcdCluster
		conditions []metav1.Condition
		done       func(*etcdv1alpha1.EtcdCluster) (bool, error)
		want       bool
		wantErr    string
	}{
		"hibernate: not begun":   {cluster: hibernatedCluster(""), done: hibernated},
		"hibernate: hibernating": {cluster: hibernatedCluster(etcdv1alpha1.HibernationHibernating), done: hibernated},
		"hibernate: hibernated":  {cluster: hibernatedCluster(etcdv1alpha1.HibernationHibernated), done: hibernated, want: true},
		"hibernate: taken back":  {cluster: testCluster(), done: hibernated, wantErr: "was unset while waiting"},
		"resume: still hibernated": {cluster: func() *etcdv1alpha1.EtcdCluster {
			c := testCluster()
			c.Status.Hibernation = hibernation(etcdv1alpha1.HibernationHibernated)
			return c
		}(), done: resumed},
		"resume: resuming, Available": {cluster: func() *etcdv1alpha1.EtcdCluster {
			c := testCluster()
			c.Status.Hibernation = hibernation(etcdv1alpha1.HibernationResuming)
			return c
		}(), conditions: available, done: resumed},
		"resume: not yet Available": {cluster: testCluster(), done: resumed},
		"resume: back":              {cluster: testCluster(), conditions: available, done: resumed, want: true},
		"resume: asked again":       {cluster: hibernatedCluster(etcdv1alpha1.HibernationResuming), done: resumed, wantErr: "was set again while waiting"},
	} {
		tc.cluster.Status.Conditions = tc.conditions
		got, err := tc.done(tc.cluster)
		if got != tc.want || (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: %v, %v; want %v, %q", name, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestHandover(t *testing.T) {
	adopting := testCluster()
	adopting.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{FromExisting: &etcdv1alpha1.ExistingSource{Endpoints: []string{"http://10.0.0.1:2379"},
		Handover: etcdv1alpha1.HandoverKeep}}
	retiring := adopting.DeepCopy()
	retiring.Name = "moving"
	retiring.Status.Adoption = &etcdv1alpha1.AdoptionStatus{Phase: etcdv1alpha1.AdoptionRetiring, Retired: []etcdv1alpha1.ExternalMember{{ID: "a1", Name: "infra1"}}}
	c := newFake(t, adopting, retiring)
	handover := func(name string) etcdv1alpha1.Handover {
		var cl etcdv1alpha1.EtcdCluster
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, &cl); err != nil {
			t.Fatal(err)
		}
		if cl.Spec.Bootstrap == nil || cl.Spec.Bootstrap.FromExisting == nil {
			return ""
		}
		return cl.Spec.Bootstrap.FromExisting.Handover
	}
	for _, s := range []struct {
		args []string
		code int
		says string
		want etcdv1alpha1.Handover
	}{
		{[]string{"db", "retire"}, ExitOK, "handover Retire", etcdv1alpha1.HandoverRetire},
		{[]string{"db", "Retire"}, ExitOK, "handover already Retire", etcdv1alpha1.HandoverRetire},
		{[]string{"db", "abort"}, ExitOK, "handover Abort", etcdv1alpha1.HandoverAbort},
		{[]string{"db", "now"}, ExitError, "want keep, retire or abort", etcdv1alpha1.HandoverAbort},
		{[]string{"moving", "abort"}, ExitError, "source member infra1 has already left", etcdv1alpha1.HandoverKeep},
	} {
		r := run(t, c, append([]string{"handover"}, s.args...)...)
		name := s.args[0]
		if r.code != s.code || !strings.Contains(r.stdout+r.stderr, s.says) || handover(name) != s.want {
			t.Errorf("handover %v: exit %d, %q %q, handover %s; want exit %d saying %q, handover %s", s.args, r.code, r.stdout, r.stderr,
				handover(name), s.code, s.says, s.want)
		}
	}
	plain := newFake(t, testCluster())
	if r := run(t, plain, "handover", "db", "retire"); r.code != ExitError || !strings.Contains(r.stderr, "adopts no running etcd") {
		t.Errorf("a cluster adopting nothing: exit %d, %q", r.code, r.stderr)
	}
}
