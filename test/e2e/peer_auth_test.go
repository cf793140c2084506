package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/pki"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/internal/testbed"
	"steward.dev/steward/test/e2e/framework"
)

// requireReplicated writes a key through the client Service and reads it back from every member on its own
// (a serializable read answers from the member's own store): every member still gets every write.
func requireReplicated(t *testing.T, c *etcdv1alpha1.EtcdCluster, value string) {
	t.Helper()
	cfg := framework.ClusterTLS(t, c)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{framework.ClientServiceURL(t, c)}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), TLS: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, err = cli.Put(ctx, "e2e/replicated", value)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	for member, addr := range framework.PodAddrs(t, c) {
		framework.Poll(t, "the write on member "+member, 30*time.Second, func() error {
			one, err := clientv3.New(clientv3.Config{Endpoints: []string{"https://" + addr}, DialTimeout: 3 * time.Second, Logger: zap.NewNop(), TLS: cfg})
			if err != nil {
				return err
			}
			defer func() { _ = one.Close() }()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			resp, err := one.Get(ctx, "e2e/replicated", clientv3.WithSerializable())
			if err != nil {
				return err
			}
			if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != value {
				return fmt.Errorf("reads %v", resp.Kvs)
			}
			return nil
		})
	}
}

// dropPeerIdentity puts the cluster's members where a Steward before the peer identity left them: each member's
// certificate re-issued from the cluster's CA without the identity (the kubelet brings it into the running Pod),
// and the Pod without the record of having held it. Called with the operator stopped.
func dropPeerIdentity(t *testing.T, c *etcdv1alpha1.EtcdCluster) {
	t.Helper()
	ctx := context.Background()
	var caSecret corev1.Secret
	if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.CASecretName(c)}, &caSecret); err != nil {
		t.Fatal(err)
	}
	ca, err := pki.ParseKeyPair(caSecret.Data[resources.SecretCertKey], caSecret.Data[resources.SecretKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	identity := resources.PeerIdentity(c, framework.OperatorOptions)
	pods := framework.MemberPodsOf(t, c)
	for i := range pods.Items {
		p := &pods.Items[i]
		var names []string
		for _, n := range resources.MemberDNSNames(c, p.Name, framework.OperatorOptions) {
			if n != identity {
				names = append(names, n)
			}
		}
		kp, err := ca.Issue(pki.Request{CommonName: p.Name, DNSNames: names, IPs: resources.MemberIPs(c), Server: true, Client: true,
			Lifetime: resources.CertificateLifetime(c)}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		var s corev1.Secret
		if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.MemberSecretName(p.Name)}, &s); err != nil {
			t.Fatal(err)
		}
		s.Data[resources.SecretCertKey], s.Data[resources.SecretKeyKey] = kp.CertPEM, kp.KeyPEM
		if err := framework.K8s.Update(ctx, &s); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(p.DeepCopy())
		delete(p.Annotations, resources.AnnotationPeerIdentity)
		if err := framework.K8s.Patch(ctx, p, patch); err != nil {
			t.Fatal(err)
		}
	}
}

// podsChecking counts the cluster's member Pods that accept only the peer identity on their peer port.
func podsChecking(t *testing.T, c *etcdv1alpha1.EtcdCluster) (checking, all int) {
	t.Helper()
	pods := framework.MemberPodsOf(t, c)
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp != nil {
			continue
		}
		all++
		if resources.PodChecksPeers(&pods.Items[i]) {
			checking++
		}
	}
	return checking, all
}

// TestPeerPortRefusesClientCertificates: only members may speak on the peer port. A 3-member cluster created
// with spec.tls.peerAuth AnyCertificate (how every cluster ran before Steward checked the peer identity) lets an
// EtcdUser's certificate read /members on port 2380. Switched to MemberIdentity under client load, its members
// restart one at a time (same members and volumes, Available throughout, no acknowledged write lost) once each
// holds a certificate carrying the peer identity; then an EtcdUser's certificate, Steward's client certificate
// and a foreign CA's certificate (even one valid for the peer identity) are refused on every member's peer port,
// a member's own is accepted, and every member still gets every write. A new cluster of provider CertManager
// (the test bed's ClusterIssuer) checks the identity from its start and refuses its own client certificate there.
func TestPeerPortRefusesClientCertificates(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "peerauth")
	stopOperator := framework.StartOperator(t, ns)
	cm := framework.NewCluster(ns, "cm", 1)
	cm.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderCertManager,
		CertManager: &etcdv1alpha1.TLSCertManager{IssuerRef: etcdv1alpha1.IssuerRef{Name: testbed.CAClusterIssuer, Kind: "ClusterIssuer"}}}
	if err := framework.K8s.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	c := framework.NewCluster(ns, "peers", 3)
	c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderSteward, PeerAuth: etcdv1alpha1.PeerAuthAnyCertificate}
	key, got := framework.Settle(t, c)
	if checking, _ := podsChecking(t, got); checking != 0 {
		t.Fatalf("%d members check the peer identity under peerAuth AnyCertificate", checking)
	}
	app := framework.NewEtcdUser(ns, "app", c.Name, "/tenant-a/", etcdv1alpha1.AccessReadWrite, false)
	users := map[string]*etcdv1alpha1.EtcdUser{"app": app}
	framework.CreateUsersReady(t, users)
	userCert, roots := framework.SecretPair(t, ns, "app-tls")
	stewardCert, _ := framework.SecretPair(t, ns, resources.ClientSecretName(got))
	otherCA, err := pki.NewCA("intruder", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	forged, err := otherCA.Issue(pki.Request{CommonName: "peers-x", DNSNames: []string{resources.PeerIdentity(got, framework.OperatorOptions)},
		Server: true, Client: true, Lifetime: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	foreignCert, err := tls.X509KeyPair(forged.CertPEM, forged.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}

	// The hole, as it was: the application's certificate reads the member list on the peer port.
	pods := framework.MemberPodsOf(t, got)
	if code, err := framework.PeerPortAnswer(got, &pods.Items[0], roots, userCert, "/members"); err != nil || code != http.StatusOK {
		t.Fatalf("peerAuth AnyCertificate: the EtcdUser's certificate on the peer port got %d %v, want 200 (any certificate of the CA)", code, err)
	}

	// The rolling change, under client load, from what a Steward before the peer identity left: with the
	// operator stopped, every member's certificate is re-issued without the identity and its Pod loses the record
	// of holding it; the spec then asks for MemberIdentity and the operator starts again.
	before := framework.Identities(t, got)
	load := framework.StartLoad(t, got)
	watch := framework.WatchSwitch(t, key)
	stopOperator()
	dropPeerIdentity(t, got)
	cfg := framework.ClusterTLS(t, got)
	framework.Poll(t, "members serving certificates without the peer identity", 3*time.Minute, func() error {
		for member, addr := range framework.PodAddrs(t, got) {
			cert, err := framework.ServedCertificate(cfg, addr)
			if err != nil {
				return err
			}
			if cert.VerifyHostname(resources.PeerIdentity(got, framework.OperatorOptions)) == nil {
				return fmt.Errorf("member %s still serves one with it", member)
			}
		}
		return nil
	})
	began := time.Now()
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.TLS.PeerAuth = etcdv1alpha1.PeerAuthMemberIdentity })
	framework.StartOperator(t, ns)
	framework.Poll(t, "every member checking the peer identity", 8*time.Minute, func() error {
		if checking, all := podsChecking(t, got); checking != all || all != 3 {
			return fmt.Errorf("%d of %d members check it", checking, all)
		}
		return nil
	})
	got = framework.WaitSettled(t, key, 3*time.Minute)
	t.Logf("AnyCertificate -> MemberIdentity: settled %s after the change", time.Since(began).Round(time.Second))
	time.Sleep(3 * time.Second) // some load on the settled cluster too
	watch.Finish(t, "AnyCertificate -> MemberIdentity")
	framework.RequireNoLostWrites(t, load, "moving to peerAuth MemberIdentity")
	if after := framework.Identities(t, got); after != before {
		t.Errorf("members or volumes changed:\n before %s\n after  %s", before, after)
	}

	framework.RequirePeerPort(t, got, roots, map[string]tls.Certificate{"an EtcdUser": userCert, "Steward": stewardCert, "a foreign CA": foreignCert})
	requireReplicated(t, got, "after the change")
	framework.CheckStatusMatchesEtcd(t, got)

	// A new cluster checks from its start: provider CertManager, whose client certificate is refused too.
	cmGot := framework.WaitSettled(t, client.ObjectKeyFromObject(cm), 4*time.Minute)
	if checking, all := podsChecking(t, cmGot); checking != all || all != 1 {
		t.Fatalf("new CertManager cluster: %d of %d members check the peer identity", checking, all)
	}
	cmClient, cmRoots := framework.SecretPair(t, ns, resources.ClientSecretName(cmGot))
	framework.RequirePeerPort(t, cmGot, cmRoots, map[string]tls.Certificate{"Steward (cert-manager's)": cmClient, "a foreign CA": foreignCert})
	framework.WriteAndReadThroughService(t, cmGot)
}
