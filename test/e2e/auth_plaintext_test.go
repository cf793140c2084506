package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"steward.dev/steward/test/linearizability"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/etcdauth"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/test/e2e/framework"
)

// passwordClient dials the cluster's client Service as the user of a password Secret, presenting no client
// certificate (on a TLS cluster it checks the members with the cluster's CA alone); an empty Secret name dials
// anonymously.
func passwordClient(t *testing.T, c *etcdv1alpha1.EtcdCluster, secretName string) *clientv3.Client {
	t.Helper()
	cfg := clientv3.Config{Endpoints: []string{framework.ClientServiceURL(t, c)}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if resources.TLSEnabled(c) {
		tlsCfg, err := caOnlyTLS(c)
		if err != nil {
			t.Fatal(err)
		}
		cfg.TLS = tlsCfg
	}
	if secretName != "" {
		cfg.Username, cfg.Password = passwordOf(t, c.Namespace, secretName)
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatalf("connect as the user of Secret %q: %v", secretName, err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// passwordOf reads the etcd user and password of a password Secret (an EtcdUser's).
func passwordOf(t *testing.T, ns, secretName string) (user, password string) {
	t.Helper()
	var s corev1.Secret
	if err := framework.K8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: secretName}, &s); err != nil {
		t.Fatal(err)
	}
	return string(s.Data[resources.SecretUsernameKey]), string(s.Data[resources.SecretPasswordKey])
}

// caOnlyTLS checks the members with the cluster's CA (from its client Secret) and presents no certificate.
func caOnlyTLS(c *etcdv1alpha1.EtcdCluster) (*tls.Config, error) {
	var s corev1.Secret
	if err := framework.K8s.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: resources.ClientSecretName(c)}, &s); err != nil {
		return nil, err
	}
	return (&etcd.TLS{CA: s.Data[resources.SecretCAKey], ServerName: resources.ClientServiceHost(c, framework.OperatorOptions)}).Config()
}

// TestAuthWithoutTLS: on a plaintext cluster (tls.provider None), where members verify no client certificates,
// authentication works with passwords: auth is turned on under client load (the load authenticates as an
// EtcdUser's password user: porcupine Ok, 0 lost); Steward acts as steward:operator, whose password it keeps in
// a Secret, and keeps managing the cluster (a scale-up, learner first, with auth on); anonymous clients are
// refused and password users can do exactly what their permissions say; a certificate EtcdUser is reported, not
// half-made; a backup taken with auth on restores into a new cluster that takes over the source's operator
// password and comes up managed; a wrong password in that cluster's Secret makes it say exactly what is wrong and
// change nothing until the password is put back; auth turned off lets anonymous clients in again.
func TestAuthWithoutTLS(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "auth-plain")
	framework.StartOperator(t, ns)
	framework.CreateS3Secret(t, ns)
	c := framework.NewCluster(ns, "plain", 3)
	c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderNone}
	if err := framework.K8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(c)
	c = framework.WaitAvailable(t, key, 4*time.Minute)

	users := map[string]*etcdv1alpha1.EtcdUser{
		"loader": framework.NewEtcdUser(ns, "loader", c.Name, "lin/", etcdv1alpha1.AccessReadWrite, true),
		"app-p":  framework.NewEtcdUser(ns, "app-p", c.Name, "/p/", etcdv1alpha1.AccessReadWrite, true),
		"q-read": framework.NewEtcdUser(ns, "q-read", c.Name, "/q/", etcdv1alpha1.AccessRead, true),
	}
	certUser := framework.NewEtcdUser(ns, "cert-user", c.Name, "/x/", etcdv1alpha1.AccessRead, false)
	if err := framework.K8s.Create(ctx, certUser); err != nil {
		t.Fatal(err)
	}
	framework.CreateUsersReady(t, users)
	framework.WaitUserReason(t, client.ObjectKeyFromObject(certUser), "CertificateNotSupported", "spec.password instead")

	user, password := passwordOf(t, ns, "loader-password")
	load := framework.StartLoadAs(t, c, user, password)
	begin := time.Now()
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Auth = &etcdv1alpha1.AuthSpec{Enabled: true} })
	c = framework.WaitAuthEnabled(t, key, true)
	t.Logf("auth enabled %s after the patch", time.Since(begin).Round(100*time.Millisecond))
	if c.Status.OperatorCredentialsSecret != "plain-operator-credentials" {
		t.Fatalf("status.operatorCredentialsSecret %q", c.Status.OperatorCredentialsSecret)
	}
	var creds corev1.Secret
	if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Status.OperatorCredentialsSecret}, &creds); err != nil {
		t.Fatal(err)
	}
	if string(creds.Data[resources.SecretUsernameKey]) != etcdauth.OperatorUser || len(creds.Data[resources.SecretPasswordKey]) != resources.PasswordLength ||
		!metav1.IsControlledBy(&creds, c) {
		t.Fatalf("operator credentials Secret: user %q, %d-byte password, owners %v", creds.Data[resources.SecretUsernameKey],
			len(creds.Data[resources.SecretPasswordKey]), creds.OwnerReferences)
	}
	var evs corev1.EventList
	if err := framework.K8s.List(ctx, &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if strings.Contains(e.Message, string(creds.Data[resources.SecretPasswordKey])) {
			t.Fatalf("an Event shows the password: %s", e.Message)
		}
	}

	anonymous := passwordClient(t, c, "")
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err := anonymous.Put(wctx, "/p/anonymous", "x")
	cancel()
	if !errors.Is(err, rpctypes.ErrUserEmpty) {
		t.Fatalf("an anonymous write with auth on: %v, want refused (user name is empty)", err)
	}
	p, q := passwordClient(t, c, "app-p-password"), passwordClient(t, c, "q-read-password")
	framework.MayWrite(t, "app-p", p, "/p/1", true)
	framework.MayRead(t, "app-p", p, "/p/1", true)
	framework.MayWrite(t, "app-p", p, "/q/1", false)
	framework.MayRead(t, "q-read", q, "/q/1", true)
	framework.MayWrite(t, "q-read", q, "/q/1", false)
	framework.MayRead(t, "q-read", q, "/p/1", false)

	// Steward acts as its password user: a scale-up (add learner, promote) needs the root role.
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = 5 })
	c = framework.WaitSettled(t, key, 4*time.Minute)

	// A backup with auth on: the Job authenticates with the operator credentials (a snapshot needs the root role).
	backup := framework.NewBackup(ns, "plain-auth", c.Name, framework.S3Destination(ns+"/plain-auth.db"))
	if err := framework.K8s.Create(ctx, backup); err != nil {
		t.Fatal(err)
	}
	framework.RequireComplete(t, framework.WaitBackupFinished(t, client.ObjectKeyFromObject(backup), 3*time.Minute), c)

	// Restored into a new plaintext cluster with auth on: the snapshot's store knows the source's operator
	// password, which the new cluster's Secret takes over, so Steward manages it from the start.
	restored := createPlaintextWithAuth(t, framework.FromBackup(ns, "plain-restored", 1, backup.Name))
	rkey := client.ObjectKeyFromObject(restored)
	var rcreds corev1.Secret
	if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: restored.Status.OperatorCredentialsSecret}, &rcreds); err != nil {
		t.Fatal(err)
	}
	if string(rcreds.Data[resources.SecretPasswordKey]) != string(creds.Data[resources.SecretPasswordKey]) {
		t.Fatal("the restored cluster's operator credentials do not carry the source's password")
	}
	framework.MayRead(t, "app-p (restored cluster)", passwordClient(t, restored, "app-p-password"), "/p/1", true)

	// A password etcd does not know (the Secret edited): Steward says exactly that and changes nothing.
	podsBefore := framework.PodUIDs(t, restored)
	good := rcreds.DeepCopy()
	patch := client.MergeFrom(rcreds.DeepCopy())
	rcreds.Data[resources.SecretPasswordKey] = []byte("not-the-password")
	if err := framework.K8s.Patch(ctx, &rcreds, patch); err != nil {
		t.Fatal(err)
	}
	framework.PatchSpec(t, rkey, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = 3 }) // a change Steward must not make now
	framework.Poll(t, "the refused password reported", 2*time.Minute, func() error {
		cur := &etcdv1alpha1.EtcdCluster{}
		if err := framework.K8s.Get(ctx, rkey, cur); err != nil {
			return err
		}
		d := meta.FindStatusCondition(cur.Status.Conditions, etcdv1alpha1.ConditionDegraded)
		a := meta.FindStatusCondition(cur.Status.Conditions, etcdv1alpha1.ConditionAvailable)
		if d == nil || d.Status != metav1.ConditionTrue || d.Reason != "OperatorPasswordRejected" || !strings.Contains(d.Message, "user passwd steward:operator") ||
			a == nil || a.Status != metav1.ConditionUnknown {
			return fmt.Errorf("Degraded %+v, Available %+v", d, a)
		}
		return nil
	})
	time.Sleep(10 * time.Second) // passes that must change nothing
	if after := framework.PodUIDs(t, restored); fmt.Sprint(after) != fmt.Sprint(podsBefore) {
		t.Fatalf("member Pods changed while Steward's password was refused: %v -> %v", podsBefore, after)
	}
	patch = client.MergeFrom(rcreds.DeepCopy())
	rcreds.Data = good.Data
	if err := framework.K8s.Patch(ctx, &rcreds, patch); err != nil {
		t.Fatal(err)
	}
	framework.WaitSettled(t, rkey, 4*time.Minute)

	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Auth.Enabled = false })
	framework.WaitAuthEnabled(t, key, false)
	framework.MayWrite(t, "anonymous (auth off)", anonymous, "/q/anything", true)
	framework.RequireNoLostWrites(t, load, "auth on without TLS, a scale-up, and auth off")
}

// verifiesClientCerts reports, per member Pod, whether it was started requiring client certificates.
func verifiesClientCerts(t *testing.T, c *etcdv1alpha1.EtcdCluster) map[string]bool {
	t.Helper()
	pods := framework.MemberPodsOf(t, c)
	out := map[string]bool{}
	for i := range pods.Items {
		out[pods.Items[i].Name] = resources.PodVerifiesClientCerts(&pods.Items[i])
	}
	return out
}

// waitClientAuth waits until the cluster is settled with every member Pod requiring client certificates, or none.
func waitClientAuth(t *testing.T, key client.ObjectKey, certs bool) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	var c *etcdv1alpha1.EtcdCluster
	framework.Poll(t, fmt.Sprintf("every member requiring client certificates: %v", certs), 4*time.Minute, func() error {
		c = framework.WaitSettled(t, key, 4*time.Minute)
		for pod, v := range verifiesClientCerts(t, c) {
			if v != certs {
				return fmt.Errorf("Pod %s requires client certificates: %v", pod, v)
			}
		}
		return nil
	})
	return c
}

// TestPasswordOnlyClients: a TLS cluster with auth on switches to tls.clientAuth Password under client load that
// authenticates with a password (0 lost, porcupine Ok): Steward makes its password user through its certificate
// first (the members still ask for one), then restarts the members one at a time without --client-cert-auth;
// then an application holding only a password and the CA reads and writes its prefix and is refused another, a
// client presenting only a certificate is refused (it no longer names a user), a certificate EtcdUser is
// reported, and a backup Job authenticates with the password; switching back to Certificate restores the
// certificates' identities.
func TestPasswordOnlyClients(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "pw-only")
	framework.StartOperator(t, ns)
	framework.CreateS3Secret(t, ns)
	bad := framework.NewCluster(ns, "bad", 1)
	bad.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderNone, ClientAuth: etcdv1alpha1.ClientAuthPassword}
	framework.Refused(t, framework.K8s.Create(ctx, bad), "tls.clientAuth Password needs a TLS provider")
	c := framework.NewCluster(ns, "pwonly", 3)
	c.Spec.Auth = &etcdv1alpha1.AuthSpec{Enabled: true}
	if err := framework.K8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(c)
	framework.WaitAvailable(t, key, 4*time.Minute)
	c = framework.WaitAuthEnabled(t, key, true)
	if c.Status.OperatorCredentialsSecret != "" {
		t.Fatalf("a certificate cluster has operator credentials %q", c.Status.OperatorCredentialsSecret)
	}

	users := map[string]*etcdv1alpha1.EtcdUser{
		"loader":         framework.NewEtcdUser(ns, "loader", c.Name, "lin/", etcdv1alpha1.AccessReadWrite, true),
		"app-p":          framework.NewEtcdUser(ns, "app-p", c.Name, "/p/", etcdv1alpha1.AccessReadWrite, true),
		"cert-user":      framework.NewEtcdUser(ns, "cert-user", c.Name, "/c/", etcdv1alpha1.AccessReadWrite, false),
		"transport-only": framework.NewEtcdUser(ns, "transport-only", c.Name, "/unused/", etcdv1alpha1.AccessRead, false),
	}
	framework.CreateUsersReady(t, users)
	certClient := framework.UserClient(t, c, users["cert-user"])
	framework.MayWrite(t, "cert-user", certClient, "/c/1", true)

	// The load authenticates with a password and presents a certificate of the cluster's CA with no user behind
	// it: what a password client needs while members still ask for a certificate, and harmless after.
	user, password := passwordOf(t, ns, "loader-password")
	load, err := linearizability.Start(linearizability.Config{Endpoints: []string{framework.ClientServiceURL(t, c)}, TLS: framework.AnonymousTLS(t, c),
		Username: user, Password: password})
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.TLS.ClientAuth = etcdv1alpha1.ClientAuthPassword
	})
	c = waitClientAuth(t, key, false)
	t.Logf("members ask for no client certificate %s after the patch", time.Since(begin).Round(100*time.Millisecond))
	if got := framework.EventsWithin(t, c, "OperatorUserRestored", begin, 1); len(got) != 1 {
		t.Fatalf("OperatorUserRestored Events %v, want one: the password user made through the certificate before the restarts", got)
	}
	if got := framework.EventsWithin(t, c, "MemberRestarting", begin, 3); len(got) < 3 {
		t.Fatalf("MemberRestarting Events %v, want one per member", got)
	}
	if c.Status.OperatorCredentialsSecret != "pwonly-operator-credentials" {
		t.Fatalf("status.operatorCredentialsSecret %q", c.Status.OperatorCredentialsSecret)
	}

	p := passwordClient(t, c, "app-p-password")
	framework.MayWrite(t, "app-p (password, no certificate)", p, "/p/1", true)
	framework.MayRead(t, "app-p (password, no certificate)", p, "/p/1", true)
	framework.MayWrite(t, "app-p (password, no certificate)", p, "/c/1", false)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = framework.UserClient(t, c, users["cert-user"]).Put(wctx, "/c/2", "x")
	cancel()
	if !errors.Is(err, rpctypes.ErrUserEmpty) {
		t.Fatalf("a certificate-only client once members ask for none: %v, want refused (user name is empty)", err)
	}
	framework.WaitUserReason(t, client.ObjectKeyFromObject(users["cert-user"]), "CertificateNotSupported", "spec.password instead")

	backup := framework.NewBackup(ns, "pw-only", c.Name, framework.S3Destination(ns+"/pw-only.db"))
	if err := framework.K8s.Create(ctx, backup); err != nil {
		t.Fatal(err)
	}
	framework.RequireComplete(t, framework.WaitBackupFinished(t, client.ObjectKeyFromObject(backup), 3*time.Minute), c)

	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.TLS.ClientAuth = etcdv1alpha1.ClientAuthCertificate })
	c = waitClientAuth(t, key, true)
	framework.WaitUserReady(t, client.ObjectKeyFromObject(users["cert-user"]), 2*time.Minute)
	framework.MayWrite(t, "cert-user (certificates required again)", framework.UserClient(t, c, users["cert-user"]), "/c/3", true)
	framework.RequireNoLostWrites(t, load, "switching tls.clientAuth to Password and back with auth on")
}

// TestTLSSwitchWithAuth: a plaintext cluster with authentication on switches to TLS for password-only clients
// (tls.clientAuth Password) and back, under load that authenticates with a password and follows the switch (0
// lost, porcupine Ok): Steward keeps acting as its password user while members listen in plaintext, in the
// Bridge step and on TLS, so the switch finishes, auth stays on and a client with only the CA and a password
// works on the TLS cluster.
func TestTLSSwitchWithAuth(t *testing.T) {
	parallel(t)
	ns := framework.NewNamespace(t, "tlsauth")
	framework.StartOperator(t, ns)
	c := createPlaintextWithAuth(t, framework.NewCluster(ns, "switch", 3))
	key := client.ObjectKeyFromObject(c)
	users := map[string]*etcdv1alpha1.EtcdUser{
		"loader": framework.NewEtcdUser(ns, "loader", c.Name, "lin", etcdv1alpha1.AccessReadWrite, true),
		"app-p":  framework.NewEtcdUser(ns, "app-p", c.Name, "/p/", etcdv1alpha1.AccessReadWrite, true),
	}
	framework.CreateUsersReady(t, users)
	user, password := passwordOf(t, ns, "loader-password")
	plain, secure := framework.ServiceTargets(t, c)
	withTLS := c.DeepCopy()
	withTLS.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderSteward}
	secure.TLSFrom = func() (*tls.Config, error) { return caOnlyTLS(withTLS) }
	plain.Username, plain.Password, secure.Username, secure.Password = user, password, user, password

	load, err := linearizability.Start(linearizability.Config{Endpoints: plain.Endpoints, Username: user, Password: password,
		Alternates: []linearizability.Target{secure}})
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderSteward, ClientAuth: etcdv1alpha1.ClientAuthPassword}
	})
	framework.WaitMembersTLS(t, key, resources.MemberTLSOn, 8*time.Minute)
	t.Logf("plaintext -> TLS with auth on: settled %s after the change", time.Since(began).Round(time.Second))
	framework.RequireNoLostWrites(t, load, "switching plaintext -> TLS (clientAuth Password) with auth on")
	if c = framework.WaitAuthEnabled(t, key, true); c.Status.OperatorCredentialsSecret != "switch-operator-credentials" {
		t.Fatalf("status.operatorCredentialsSecret %q", c.Status.OperatorCredentialsSecret)
	}
	for pod, certs := range verifiesClientCerts(t, c) {
		if certs {
			t.Fatalf("Pod %s requires client certificates; tls.clientAuth is Password", pod)
		}
	}
	framework.MayWrite(t, "app-p (CA and password)", passwordClient(t, c, "app-p-password"), "/p/1", true)
	framework.MayWrite(t, "app-p (CA and password)", passwordClient(t, c, "app-p-password"), "/q/1", false)

	secureCfg, err := caOnlyTLS(c)
	if err != nil {
		t.Fatal(err)
	}
	secure.TLS, secure.TLSFrom = secureCfg, nil
	load, err = linearizability.Start(linearizability.Config{Endpoints: secure.Endpoints, TLS: secureCfg, Username: user, Password: password,
		Alternates: []linearizability.Target{plain}, Prefix: "lin-off/"})
	if err != nil {
		t.Fatal(err)
	}
	began = time.Now()
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderNone}
	})
	framework.WaitMembersTLS(t, key, resources.MemberTLSPlaintext, 8*time.Minute)
	t.Logf("TLS -> plaintext with auth on: settled %s after the change", time.Since(began).Round(time.Second))
	framework.RequireNoLostWrites(t, load, "switching TLS -> plaintext with auth on")
	c = framework.WaitAuthEnabled(t, key, true)
	framework.MayWrite(t, "app-p (plaintext, password)", passwordClient(t, c, "app-p-password"), "/p/2", true)
}

// createPlaintextWithAuth creates cluster c as a plaintext cluster with authentication on and waits until it is
// Available and etcd enforces authentication.
func createPlaintextWithAuth(t *testing.T, c *etcdv1alpha1.EtcdCluster) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderNone}
	c.Spec.Auth = &etcdv1alpha1.AuthSpec{Enabled: true}
	if err := framework.K8s.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(c)
	framework.WaitAvailable(t, key, 4*time.Minute)
	return framework.WaitAuthEnabled(t, key, true)
}
