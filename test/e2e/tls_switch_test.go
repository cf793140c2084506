package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/internal/testbed"
	"steward.dev/steward/test/e2e/framework"
	"steward.dev/steward/test/linearizability"
)

// requireKeys reads back keys (prefix e2e/known/) with cfg through endpoint.
func requireKeys(t *testing.T, endpoint string, cfg *tls.Config, want map[string]string) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), TLS: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "e2e/known/", clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("read known keys through %s: %v", endpoint, err)
	}
	got := map[string]string{}
	for _, kv := range resp.Kvs {
		got[string(kv.Key)] = string(kv.Value)
	}
	if fmt.Sprint(framework.Sorted(got)) != fmt.Sprint(framework.Sorted(want)) {
		t.Fatalf("known keys: %d read back, %d written", len(got), len(want))
	}
}

// TestTLSSwitchUnderLoad: a running plaintext cluster is switched to TLS by setting spec.tls.provider to Steward,
// back by setting it to None, and to TLS again with provider CertManager, each while clients read and write through the client Service (a client that
// fails one way tries the other). Throughout, the cluster stays Available, no plaintext member ever runs beside a
// TLS one, and every member passes through Bridge; afterwards the members are the same (IDs, volumes), the
// history is linearizable and no acknowledged write is lost. Half-way through, the operator is stopped and started
// again. With TLS the members refuse plaintext clients;
// after switching back they serve plaintext again.
func TestTLSSwitchUnderLoad(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "tlsswitch")
	stopOperator := framework.StartOperator(t, ns)
	c := framework.NewCluster(ns, "switch", 3)
	c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderNone}
	key, got := framework.Settle(t, c)
	if got.Status.TLS != nil {
		t.Fatalf("plaintext cluster has status.tls %+v", got.Status.TLS)
	}
	plain, secure := framework.ServiceTargets(t, got)
	known := map[string]string{}
	{
		cli, err := clientv3.New(clientv3.Config{Endpoints: plain.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 50; i++ {
			k, v := fmt.Sprintf("e2e/known/%02d", i), fmt.Sprintf("value-%d", i)
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := cli.Put(pctx, k, v)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			known[k] = v
		}
		_ = cli.Close()
	}
	before := framework.Identities(t, got)

	// Plaintext -> TLS.
	load, err := linearizability.Start(linearizability.Config{Endpoints: plain.Endpoints, Alternates: []linearizability.Target{secure}})
	if err != nil {
		t.Fatal(err)
	}
	watch := framework.WatchSwitch(t, key)
	began := time.Now()
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderSteward}
	})
	// Half-way (one member serves TLS, the others are Bridge), the operator stops and starts again: it carries
	// on from what it observes.
	framework.Poll(t, "a first member serving TLS", 4*time.Minute, func() error {
		var c etcdv1alpha1.EtcdCluster
		if err := framework.K8s.Get(ctx, key, &c); err != nil {
			return err
		}
		for _, m := range c.Status.Members {
			if m.TLS == resources.MemberTLSOn {
				return nil
			}
		}
		return fmt.Errorf("none yet: %s", framework.Describe(&c))
	})
	stopOperator()
	t.Logf("operator stopped mid-switch, %s after the change", time.Since(began).Round(100*time.Millisecond))
	time.Sleep(3 * time.Second)
	framework.StartOperator(t, ns)
	got = framework.WaitMembersTLS(t, key, resources.MemberTLSOn, 8*time.Minute)
	t.Logf("plaintext -> TLS: settled %s after the change", time.Since(began).Round(time.Second))
	time.Sleep(3 * time.Second) // some load on the settled TLS cluster too
	modes := watch.Finish(t, "plaintext -> TLS")
	framework.RequireNoLostWrites(t, load, "switching plaintext -> TLS")
	for name, seen := range modes {
		if !strings.Contains(strings.Join(seen, ","), "Plaintext,Bridge") || seen[len(seen)-1] != resources.MemberTLSOn {
			t.Errorf("member %s went through %v, want Plaintext, Bridge, ..., TLS", name, seen)
		}
	}
	if after := framework.Identities(t, got); after != before {
		t.Errorf("members or volumes changed:\n before %s\n after  %s", before, after)
	}
	if got.Status.TLS == nil || got.Status.TLS.CASecret != "switch-ca" {
		t.Errorf("status.tls %+v", got.Status.TLS)
	}
	cfg := framework.ClusterTLS(t, got)
	for member, addr := range framework.PodAddrs(t, got) {
		framework.RequireRefused(t, "plaintext client to "+member, "http://"+addr, nil)
		if _, err := framework.ServedCertificate(cfg, addr); err != nil {
			t.Errorf("member %s with the client certificate: %v", member, err)
		}
	}
	requireKeys(t, secure.Endpoints[0], cfg, known)
	framework.CheckStatusMatchesEtcd(t, got)

	// TLS -> plaintext.
	secure.TLS = cfg
	load, err = linearizability.Start(linearizability.Config{Endpoints: secure.Endpoints, TLS: cfg, Alternates: []linearizability.Target{plain},
		Prefix: "lin-off/"})
	if err != nil {
		t.Fatal(err)
	}
	watch = framework.WatchSwitch(t, key)
	began = time.Now()
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderNone}
	})
	got = framework.WaitMembersTLS(t, key, resources.MemberTLSPlaintext, 8*time.Minute)
	t.Logf("TLS -> plaintext: settled %s after the change", time.Since(began).Round(time.Second))
	time.Sleep(3 * time.Second)
	modes = watch.Finish(t, "TLS -> plaintext")
	framework.RequireNoLostWrites(t, load, "switching TLS -> plaintext")
	for name, seen := range modes {
		if seen[0] != resources.MemberTLSOn || seen[len(seen)-1] != resources.MemberTLSPlaintext {
			t.Errorf("member %s went through %v, want TLS, ..., Plaintext", name, seen)
		}
	}
	if after := framework.Identities(t, got); after != before {
		t.Errorf("members or volumes changed:\n before %s\n after  %s", before, after)
	}
	if got.Status.TLS != nil {
		t.Errorf("plaintext again, status.tls %+v", got.Status.TLS)
	}
	for member, addr := range framework.PodAddrs(t, got) {
		framework.RequireRefused(t, "TLS client to plaintext member "+member, "https://"+addr, cfg)
	}
	requireKeys(t, plain.Endpoints[0], nil, known)
	framework.CheckStatusMatchesEtcd(t, got)

	// Plaintext -> TLS again, now with certificates from cert-manager (the test bed's CA ClusterIssuer): the same
	// switch, waiting for cert-manager to issue each member's certificate before its Pod is re-created.
	secure.TLS = nil // cert-manager's client certificate, read on first use
	load, err = linearizability.Start(linearizability.Config{Endpoints: plain.Endpoints, Alternates: []linearizability.Target{secure}, Prefix: "lin-cm/"})
	if err != nil {
		t.Fatal(err)
	}
	watch = framework.WatchSwitch(t, key)
	began = time.Now()
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderCertManager,
			CertManager: &etcdv1alpha1.TLSCertManager{IssuerRef: etcdv1alpha1.IssuerRef{Name: testbed.CAClusterIssuer, Kind: "ClusterIssuer"}}}
	})
	got = framework.WaitMembersTLS(t, key, resources.MemberTLSOn, 8*time.Minute)
	t.Logf("plaintext -> TLS (CertManager): settled %s after the change", time.Since(began).Round(time.Second))
	time.Sleep(3 * time.Second)
	watch.Finish(t, "plaintext -> TLS (CertManager)")
	framework.RequireNoLostWrites(t, load, "switching plaintext -> TLS with cert-manager")
	if after := framework.Identities(t, got); after != before {
		t.Errorf("members or volumes changed:\n before %s\n after  %s", before, after)
	}
	cmCfg := framework.ClusterTLS(t, got)
	for member, addr := range framework.PodAddrs(t, got) {
		framework.RequireRefused(t, "plaintext client to "+member, "http://"+addr, nil)
		framework.RequireRefused(t, "Steward's earlier CA to "+member, "https://"+addr, cfg)
		if _, err := framework.ServedCertificate(cmCfg, addr); err != nil {
			t.Errorf("member %s with cert-manager's client certificate: %v", member, err)
		}
	}
	requireKeys(t, secure.Endpoints[0], cmCfg, known)
	framework.CheckStatusMatchesEtcd(t, got)
	framework.DeleteAndCheckNothingLeft(t, got)
}
