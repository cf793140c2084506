package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/test/e2e/framework"
)

// etcdctlPod runs etcdctl with args in a Pod of the etcd image that mounts only Secret secret (at /creds, as an
// application would), against the cluster's client Service by its in-cluster DNS name, and returns how the Pod
// ended (Succeeded or Failed) and its output.
func etcdctlPod(t *testing.T, c *etcdv1alpha1.EtcdCluster, name, secret string, args ...string) (corev1.PodPhase, string) {
	t.Helper()
	ctx := context.Background()
	nonRoot, uid := true, int64(65532)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name}, Spec: corev1.PodSpec{
		RestartPolicy:   corev1.RestartPolicyNever,
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &nonRoot, RunAsUser: &uid},
		Volumes:         []corev1.Volume{{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}}},
		Containers: []corev1.Container{{Name: "etcdctl", Image: resources.Image(c, framework.OperatorOptions), ImagePullPolicy: corev1.PullIfNotPresent,
			Command: []string{"/usr/local/bin/etcdctl"},
			Args: append([]string{"--endpoints=https://" + resources.ClientServiceHost(c, framework.OperatorOptions) + ":2379",
				"--cacert=/creds/ca.crt", "--cert=/creds/tls.crt", "--key=/creds/tls.key", "--dial-timeout=5s", "--command-timeout=10s"}, args...),
			VolumeMounts: []corev1.VolumeMount{{Name: "creds", MountPath: "/creds", ReadOnly: true}}}},
	}}
	if err := framework.K8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	framework.Poll(t, "Pod "+name+" to finish", 2*time.Minute, func() error {
		if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			return fmt.Errorf("phase %s", pod.Status.Phase)
		}
		return nil
	})
	return pod.Status.Phase, framework.Kubectl(t, "", "logs", "-n", c.Namespace, name)
}

// TestEtcdUsersAndAuth: EtcdUsers on a TLS cluster get their Secrets and etcd entries while auth is off
// (reported as prepared, not enforced); auth is turned on under client load (Steward's own certificate, which
// the load uses, keeps working: porcupine Ok, 0 lost); then two certificate users with disjoint prefixes, a
// password user and a read-only user can do exactly what their permissions say, also from a Pod mounting only
// its Secret; a permission added by hand in etcd is revoked again; a certificate is renewed in place without
// member restarts; a deleted EtcdUser is refused at once; a backup works with auth on and restores into a new
// cluster with auth on; auth turned off lets everyone in again. A bad EtcdUser is refused at admission or reported, with nothing changed.
func TestEtcdUsersAndAuth(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "auth")
	framework.StartOperator(t, ns)
	c := framework.NewCluster(ns, "authed", 3)
	if err := framework.K8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	framework.CreateS3Secret(t, ns)
	key := client.ObjectKeyFromObject(c)
	c = framework.WaitAvailable(t, key, 4*time.Minute)

	// Bad input: refused at admission.
	bad := framework.NewEtcdUser(ns, "root", c.Name, "/x/", etcdv1alpha1.AccessRead, false)
	framework.Refused(t, framework.K8s.Create(ctx, bad), "root is reserved for Steward")
	bad.Spec.UserName = "steward:me"
	framework.Refused(t, framework.K8s.Create(ctx, bad), "reserved for Steward")
	bad = framework.NewEtcdUser(ns, "nothing", c.Name, "/x/", etcdv1alpha1.AccessRead, false)
	bad.Spec.Permissions = nil
	framework.Refused(t, framework.K8s.Create(ctx, bad), "a user whose role grants nothing")
	bad = framework.NewEtcdUser(ns, "backwards", c.Name, "/x/", etcdv1alpha1.AccessRead, false)
	bad.Spec.Permissions = []etcdv1alpha1.KeyPermission{{Key: ptr.To("/b"), RangeEnd: ptr.To("/a"), Access: etcdv1alpha1.AccessRead}}
	framework.Refused(t, framework.K8s.Create(ctx, bad), "rangeEnd must sort after key")
	// Reported, nothing changed: an unknown cluster, and a Secret the user did not let Steward own.
	orphan := framework.NewEtcdUser(ns, "orphan", "no-such-cluster", "/o/", etcdv1alpha1.AccessRead, true)
	if err := framework.K8s.Create(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken-tls",
		Labels: map[string]string{"app.kubernetes.io/managed-by": "steward"}}, Data: map[string][]byte{"keep": []byte("me")}}
	if err := framework.K8s.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	taken := framework.NewEtcdUser(ns, "taken", c.Name, "/t/", etcdv1alpha1.AccessRead, false)
	if err := framework.K8s.Create(ctx, taken); err != nil {
		t.Fatal(err)
	}

	users := map[string]*etcdv1alpha1.EtcdUser{
		"app-a":          framework.NewEtcdUser(ns, "app-a", c.Name, "/a/", etcdv1alpha1.AccessReadWrite, false),
		"app-b":          framework.NewEtcdUser(ns, "app-b", c.Name, "/b/", etcdv1alpha1.AccessReadWrite, false),
		"app-c":          framework.NewEtcdUser(ns, "app-c", c.Name, "/c/", etcdv1alpha1.AccessReadWrite, true),
		"a-reader":       framework.NewEtcdUser(ns, "a-reader", c.Name, "/a/", etcdv1alpha1.AccessRead, false),
		"transport-only": framework.NewEtcdUser(ns, "transport-only", c.Name, "/unused/", etcdv1alpha1.AccessRead, false),
	}
	framework.CreateUsersReady(t, users)
	for name := range users {
		if c := meta.FindStatusCondition(users[name].Status.Conditions, etcdv1alpha1.ConditionReady); !strings.Contains(c.Message, "not enforced") {
			t.Fatalf("%s Ready before auth is on: %q, want it to say the permissions are not enforced yet", name, c.Message)
		}
	}
	if u := users["app-a"]; u.Status.CertificateSecretName != "app-a-tls" || u.Status.CertificateNotAfter == nil || u.Status.UserName != "app-a" ||
		strings.Join(u.Status.Roles, ",") != "app-a" {
		t.Fatalf("app-a status %+v", u.Status)
	}
	framework.WaitUserReason(t, client.ObjectKeyFromObject(orphan), "ClusterNotFound", "")
	framework.WaitUserReason(t, client.ObjectKeyFromObject(taken), "SecretConflict", "")
	if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(foreign), foreign); err != nil || string(foreign.Data["keep"]) != "me" || len(foreign.OwnerReferences) != 0 {
		t.Fatalf("the Secret Steward does not own was changed: %v %+v", err, foreign)
	}

	// A user made by hand, which no EtcdUser declares: reported once auth is on, deleted only when asked.
	root, _ := framework.MemberClient(t, c)
	if _, err := root.UserAdd(ctx, "hand-made", "a-password"); err != nil {
		t.Fatal(err)
	}

	load := framework.StartLoad(t, c)
	begin := time.Now()
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Auth = &etcdv1alpha1.AuthSpec{Enabled: true} })
	framework.Poll(t, "status.authEnabled true", 2*time.Minute, func() error {
		if err := framework.K8s.Get(ctx, key, c); err != nil {
			return err
		}
		if c.Status.AuthEnabled == nil || !*c.Status.AuthEnabled {
			return fmt.Errorf("status.authEnabled %v", c.Status.AuthEnabled)
		}
		return nil
	})
	t.Logf("auth enabled %s after the patch", time.Since(begin).Round(100*time.Millisecond))
	framework.Poll(t, "the hand-made user reported", 2*time.Minute, func() error {
		if err := framework.K8s.Get(ctx, key, c); err != nil {
			return err
		}
		if strings.Join(c.Status.UndeclaredUsers, ",") != "hand-made" {
			return fmt.Errorf("status.undeclaredUsers %v", c.Status.UndeclaredUsers)
		}
		return nil
	})

	a, b, pw, reader := framework.UserClient(t, c, users["app-a"]), framework.UserClient(t, c, users["app-b"]), framework.UserClient(t, c, users["app-c"]), framework.UserClient(t, c, users["a-reader"])
	framework.MayWrite(t, "app-a", a, "/a/1", true)
	framework.MayRead(t, "app-a", a, "/a/1", true)
	framework.MayWrite(t, "app-a", a, "/b/1", false)
	framework.MayRead(t, "app-a", a, "/b/1", false)
	framework.MayWrite(t, "app-b", b, "/b/1", true)
	framework.MayWrite(t, "app-b", b, "/a/1", false)
	framework.MayRead(t, "app-b", b, "/a/1", false)
	framework.MayWrite(t, "app-c (password)", pw, "/c/1", true)
	framework.MayWrite(t, "app-c (password)", pw, "/a/1", false)
	framework.MayRead(t, "a-reader", reader, "/a/1", true)
	framework.MayWrite(t, "a-reader", reader, "/a/2", false)
	framework.MayWrite(t, "transport-only", framework.UserClient(t, c, users["transport-only"]), "/a/3", false)
	// The same from application Pods that mount only app-a's Secret.
	if phase, out := etcdctlPod(t, c, "app-a-own", "app-a-tls", "put", "/a/from-pod", "x"); phase != corev1.PodSucceeded {
		t.Fatalf("app-a's Pod writing /a/: %s\n%s", phase, out)
	}
	if phase, out := etcdctlPod(t, c, "app-a-other", "app-a-tls", "put", "/b/from-pod", "x"); phase != corev1.PodFailed ||
		!strings.Contains(out, "permission denied") {
		t.Fatalf("app-a's Pod writing /b/: %s, want Failed with permission denied\n%s", phase, out)
	}

	// Drift: a permission granted by hand in etcd is revoked again by the next pass.
	if _, err := root.RoleGrantPermission(ctx, "app-a", "/b/", "/b0", clientv3.PermissionType(clientv3.PermReadWrite)); err != nil {
		t.Fatal(err)
	}
	framework.MayWrite(t, "app-a (drifted)", a, "/b/drift", true)
	framework.Poll(t, "the hand-made permission revoked", 3*time.Minute, func() error {
		resp, err := root.RoleGet(ctx, "app-a")
		if err != nil {
			return err
		}
		if len(resp.Perm) != 1 || string(resp.Perm[0].Key) != "/a/" {
			return fmt.Errorf("role app-a holds %v", resp.Perm)
		}
		return nil
	})
	framework.MayWrite(t, "app-a", a, "/b/1", false)

	// Renewal in place: a new certificate lifetime re-issues app-a's certificate into the same Secret (and the
	// members', which etcd reloads without a restart); reading the Secret again, the application keeps its access.
	podsBefore := framework.PodUIDs(t, c)
	oldNotAfter := users["app-a"].Status.CertificateNotAfter.Time
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.TLS.CertificateLifetime = &metav1.Duration{Duration: 1000 * time.Hour}
	})
	framework.Poll(t, "app-a's certificate re-issued for the new lifetime", 2*time.Minute, func() error {
		u := &etcdv1alpha1.EtcdUser{}
		if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(users["app-a"]), u); err != nil {
			return err
		}
		if na := u.Status.CertificateNotAfter; na == nil || !na.Time.Before(oldNotAfter.Add(-24*time.Hour)) {
			return fmt.Errorf("certificateNotAfter %v (was %v)", na, oldNotAfter)
		}
		users["app-a"] = u
		return nil
	})
	framework.MayWrite(t, "app-a (renewed certificate)", framework.UserClient(t, c, users["app-a"]), "/a/renewed", true)
	if after := framework.PodUIDs(t, c); fmt.Sprint(after) != fmt.Sprint(podsBefore) {
		t.Fatalf("member Pods changed during the renewal: %v -> %v", podsBefore, after)
	}

	// A deleted EtcdUser is refused at once: its etcd user is gone before the object.
	if err := framework.K8s.Delete(ctx, users["app-b"]); err != nil {
		t.Fatal(err)
	}
	framework.Poll(t, "EtcdUser app-b gone", time.Minute, func() error {
		err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app-b"}, &etcdv1alpha1.EtcdUser{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %w", err)
	})
	framework.MayWrite(t, "app-b (deleted)", b, "/b/2", false)
	if _, err := root.UserGet(ctx, "app-b"); !errors.Is(err, rpctypes.ErrUserNotFound) {
		t.Fatalf("etcd user app-b after its EtcdUser was deleted: %v", err)
	}

	// Backups authenticate as root (Steward's certificate): a snapshot needs the root role.
	backup := framework.NewBackup(ns, "with-auth", c.Name, framework.S3Destination(ns+"/with-auth.db"))
	if err := framework.K8s.Create(ctx, backup); err != nil {
		t.Fatal(err)
	}
	framework.RequireComplete(t, framework.WaitBackupFinished(t, client.ObjectKeyFromObject(backup), 3*time.Minute), c)
	// Restored into a new cluster (another name, another CA): the snapshot holds the auth store, and Steward's
	// certificate (CN root) is accepted by it, so the new cluster forms and is managed with auth on.
	restored := framework.FromBackup(ns, "restored", 1, backup.Name)
	restored.Spec.Auth = &etcdv1alpha1.AuthSpec{Enabled: true}
	if err := framework.K8s.Create(ctx, restored); err != nil {
		t.Fatal(err)
	}
	restored = framework.WaitAvailable(t, client.ObjectKeyFromObject(restored), 4*time.Minute)
	if restored.Status.AuthEnabled == nil || !*restored.Status.AuthEnabled {
		t.Fatalf("restored cluster: status.authEnabled %v, want true (from the snapshot, as the spec asks)", restored.Status.AuthEnabled)
	}
	restoredRoot, _ := framework.MemberClient(t, restored)
	if resp, err := restoredRoot.UserGet(ctx, "app-a"); err != nil || strings.Join(resp.Roles, ",") != "app-a" {
		t.Fatalf("etcd user app-a in the restored cluster: %v %v", resp, err)
	}

	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Auth.RemoveUndeclaredUsers = true })
	framework.Poll(t, "the hand-made user removed", 2*time.Minute, func() error {
		if _, err := root.UserGet(ctx, "hand-made"); !errors.Is(err, rpctypes.ErrUserNotFound) {
			return fmt.Errorf("user hand-made: %w", err)
		}
		return nil
	})
	for _, name := range []string{"app-a", "app-c", "a-reader", "transport-only"} {
		if _, err := root.UserGet(ctx, name); err != nil {
			t.Fatalf("declared user %s after removing undeclared ones: %v", name, err)
		}
	}

	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Auth.Enabled = false })
	framework.Poll(t, "status.authEnabled false", 2*time.Minute, func() error {
		if err := framework.K8s.Get(ctx, key, c); err != nil {
			return err
		}
		if c.Status.AuthEnabled == nil || *c.Status.AuthEnabled {
			return fmt.Errorf("status.authEnabled %v", c.Status.AuthEnabled)
		}
		return nil
	})
	framework.MayWrite(t, "a-reader (auth off)", reader, "/b/anything", true)
	framework.RequireNoLostWrites(t, load, "auth on and off")
}
