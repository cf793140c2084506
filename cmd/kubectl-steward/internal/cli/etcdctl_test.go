package cli

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/cmd/kubectl-steward/internal/proxy"
	"steward.dev/steward/internal/pki"
	"steward.dev/steward/internal/resources"
)

// TestMain lets the test binary stand in for etcdctl: with FAKE_ETCDCTL set it dials the endpoint it is given,
// sends its remaining arguments as one line and prints the member's answer, as a tiny etcdctl would. It exits
// with 3 when its arguments include "fail", to show that etcdctl's exit code is passed through.
func TestMain(m *testing.M) {
	if os.Getenv("FAKE_ETCDCTL") == "1" {
		os.Exit(fakeEtcdctl(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func fakeEtcdctl(args []string) int {
	if len(args) == 0 || !strings.HasPrefix(args[0], "--endpoints=unix://") {
		fmt.Fprintln(os.Stderr, "fake etcdctl: first argument is not a unix endpoint:", args)
		return 9
	}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "ETCDCTL_ENDPOINTS=") {
			fmt.Fprintln(os.Stderr, "fake etcdctl: ETCDCTL_ENDPOINTS leaked into the environment")
			return 8
		}
	}
	conn, err := net.Dial("unix", strings.TrimPrefix(args[0], "--endpoints=unix://")) //nolint:gosec // the socket the plugin under test created
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake etcdctl:", err)
		return 7
	}
	defer func() { _ = conn.Close() }()
	line := strings.Join(args[1:], " ")
	if user := os.Getenv("ETCDCTL_USER"); user != "" {
		line = "as " + user + ": " + line
	}
	fmt.Fprintln(conn, line)
	answer, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake etcdctl: read:", err)
		return 6
	}
	fmt.Print(answer)
	for _, a := range args {
		if a == "fail" {
			return 3
		}
	}
	return 0
}

// member is a stand-in for a member's client port: it answers each line with who the client was and the
// line, over TLS requiring a client certificate of ca when ca is set, else in plaintext.
func member(t *testing.T, serverCert *pki.KeyPair, ca *pki.KeyPair) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if serverCert != nil {
		pool := x509.NewCertPool()
		pool.AddCert(ca.Cert)
		cert, err := tls.X509KeyPair(serverCert.CertPEM, serverCert.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		l = tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
			NextProtos: []string{"h2"}})
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				line, err := bufio.NewReader(c).ReadString('\n')
				if err != nil {
					return
				}
				who := "anonymous"
				if tc, ok := c.(*tls.Conn); ok && len(tc.ConnectionState().PeerCertificates) > 0 {
					// etcd tells gRPC from HTTP/1.1 on its TLS port by ALPN: the proxy must ask for h2.
					who = tc.ConnectionState().PeerCertificates[0].Subject.CommonName + " over " + tc.ConnectionState().NegotiatedProtocol
				}
				fmt.Fprintf(c, "member answered %s: %s", who, line)
			}()
		}
	}()
	return l
}

type pkiSet struct{ ca, server, client *pki.KeyPair }

func issue(t *testing.T, serverName string) pkiSet {
	t.Helper()
	ca, err := pki.NewCA("db-ca", now)
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.Issue(pki.Request{CommonName: "db-aaaaa", DNSNames: []string{serverName}, Server: true, Lifetime: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Issue(pki.Request{CommonName: "steward:db", Client: true, Lifetime: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return pkiSet{ca, server, client}
}

// runEtcdctl runs `etcdctl db -- args` with the test binary as etcdctl and connections to the member going
// to l instead of through a port-forward.
func runEtcdctl(t *testing.T, objs []runtimeObject, l net.Listener, args ...string) result {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	runtimeDir := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", runtimeDir)
	t.Setenv("FAKE_ETCDCTL", "1")
	t.Setenv("ETCDCTL_ENDPOINTS", "https://elsewhere:2379")
	c := newFake(t, objs...)
	var dialed string
	r := runWith(t, c, func(o *Options) {
		o.DialMember = func(_ *rest.Config, ns, pod string, port int) proxy.Dialer {
			dialed = fmt.Sprintf("%s/%s:%d", ns, pod, port)
			return proxy.DialerFunc(func(ctx context.Context) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "tcp", l.Addr().String())
			})
		}
	}, append([]string{"etcdctl", "db", "--etcdctl", self, "--"}, args...)...)
	if r.code == ExitOK && dialed != "ns/db-aaaaa:2379" {
		t.Errorf("dialed %q, want the member Pod's client port", dialed)
	}
	left, err := os.ReadDir(runtimeDir)
	if err != nil || len(left) != 0 {
		t.Errorf("the private directory was not removed: %v %v", left, err)
	}
	return r
}

func TestEtcdctlTLS(t *testing.T) {
	p := issue(t, "db.ns.svc.cluster.local")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db-client", Namespace: "ns"},
		Data: map[string][]byte{"ca.crt": p.ca.CertPEM, "tls.crt": p.client.CertPEM, "tls.key": p.client.KeyPEM}}
	objs := []runtimeObject{testCluster(), memberPod("db-aaaaa", true), secret}

	r := runEtcdctl(t, objs, member(t, p.server, p.ca), "get", "greeting")
	if r.code != ExitOK || r.stdout != "member answered steward:db over h2: get greeting\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runEtcdctl(t, objs, member(t, p.server, p.ca), "put", "fail")
	if r.code != 3 {
		t.Errorf("etcdctl's exit code 3 became %d (stderr %q)", r.code, r.stderr)
	}

	// A member whose certificate is from another CA, or lacks the name, is refused before etcdctl runs.
	other := issue(t, "db.ns.svc.cluster.local")
	r = runEtcdctl(t, objs, member(t, other.server, other.ca), "get", "x")
	if r.code != ExitError || !strings.Contains(r.stderr, "TLS handshake with the member") || strings.Contains(r.stdout, "member answered") {
		t.Errorf("another CA: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	wrongName := issue(t, "other.ns.svc.cluster.local")
	secret.Data = map[string][]byte{"ca.crt": wrongName.ca.CertPEM, "tls.crt": wrongName.client.CertPEM, "tls.key": wrongName.client.KeyPEM}
	r = runEtcdctl(t, objs, member(t, wrongName.server, wrongName.ca), "get", "x")
	if r.code != ExitError || !strings.Contains(r.stderr, "db.ns.svc.cluster.local") {
		t.Errorf("wrong name: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestEtcdctlPlaintextAndRefusals(t *testing.T) {
	cluster := testCluster()
	cluster.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderNone}
	cluster.Status.TLS = nil
	objs := []runtimeObject{cluster, memberPod("db-aaaaa", false)}
	r := runEtcdctl(t, objs, member(t, nil, nil), "endpoint", "status")
	if r.code != ExitOK || r.stdout != "member answered anonymous: endpoint status\n" {
		t.Errorf("plaintext: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runEtcdctl(t, objs, member(t, nil, nil), "--endpoints=https://x:2379", "get", "k")
	if r.code != ExitError || !strings.Contains(r.stderr, "etcdctl --endpoints is set by kubectl steward") {
		t.Errorf("--endpoints: exit %d, stderr %q", r.code, r.stderr)
	}
	r = runWith(t, newFake(t, objs...), nil, "etcdctl", "db", "--etcdctl", filepath.Join(t.TempDir(), "none"), "--", "get", "k")
	if r.code != ExitError || !strings.Contains(r.stderr, "etcdctl not found") {
		t.Errorf("no etcdctl: exit %d, stderr %q", r.code, r.stderr)
	}
	notReady := memberPod("db-aaaaa", false)
	notReady.Status.Conditions = nil
	self, _ := os.Executable()
	r = runWith(t, newFake(t, cluster, notReady), nil, "etcdctl", "db", "--etcdctl", self, "--", "get", "k")
	if r.code != ExitError || !strings.Contains(r.stderr, "no ready member Pod") {
		t.Errorf("no ready Pod: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestEtcdctlOperatorPassword: on a plaintext cluster where Steward acts as a password user, etcdctl acts as it
// too, through its environment; not when the user says who to be.
func TestEtcdctlOperatorPassword(t *testing.T) {
	cluster := testCluster()
	cluster.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderNone}
	cluster.Spec.Auth = &etcdv1alpha1.AuthSpec{Enabled: true}
	cluster.Status.TLS = nil
	cluster.Status.OperatorCredentialsSecret = "db-operator-credentials"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db-operator-credentials", Namespace: "ns"},
		Data: map[string][]byte{"username": []byte("steward:operator"), "password": []byte("pw")}}
	objs := []runtimeObject{cluster, memberPod("db-aaaaa", false), secret}
	r := runEtcdctl(t, objs, member(t, nil, nil), "get", "k")
	if r.code != ExitOK || r.stdout != "member answered anonymous: as steward:operator:pw: get k\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runEtcdctl(t, objs, member(t, nil, nil), "--user=app", "get", "k")
	if r.code != ExitOK || r.stdout != "member answered anonymous: --user=app get k\n" {
		t.Errorf("--user given: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runEtcdctl(t, objs[:2], member(t, nil, nil), "get", "k")
	if r.code != ExitError || !strings.Contains(r.stderr, "Secret db-operator-credentials; or give etcdctl --user") {
		t.Errorf("Secret missing: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestChooseMember(t *testing.T) {
	cluster := testCluster()
	cluster.Status.Members = []etcdv1alpha1.MemberStatus{{Name: "db-aaaaa", Healthy: false}, {Name: "db-bbbbb", Healthy: true}, {Name: "db-ccccc", Healthy: true}}
	bridge := memberPod("db-ccccc", true)
	bridge.Annotations[resources.AnnotationTLSListeners] = "plaintext"
	noIP := memberPod("db-ddddd", true)
	noIP.Status.PodIP = ""
	terminating := memberPod("db-bbbbb", true)
	terminating.DeletionTimestamp = &metav1.Time{Time: now}
	other := memberPod("x-aaaaa", true)
	other.Labels[resources.LabelCluster] = "x"

	tests := map[string]struct {
		pods    []corev1.Pod
		want    string
		tls     bool
		wantErr string
	}{
		"healthy before unhealthy, then by name":            {pods: []corev1.Pod{*memberPod("db-aaaaa", true), *memberPod("db-ccccc", true), *memberPod("db-bbbbb", true)}, want: "db-bbbbb", tls: true},
		"an unhealthy member when it is the only ready one": {pods: []corev1.Pod{*memberPod("db-aaaaa", true), *terminating, *noIP}, want: "db-aaaaa", tls: true},
		"a Bridge member listens in plaintext":              {pods: []corev1.Pod{*bridge}, want: "db-ccccc", tls: false},
		"the member asked for":                              {pods: []corev1.Pod{*memberPod("db-aaaaa", false), *memberPod("db-bbbbb", true)}, want: "db-aaaaa", tls: false},
		"nothing ready":                                     {pods: []corev1.Pod{*terminating, *noIP, *other}, wantErr: "no ready member Pod"},
	}
	for name, tc := range tests {
		want := ""
		if name == "the member asked for" {
			want = "db-aaaaa"
		}
		p, tlsOn, err := ChooseMember(cluster, tc.pods, want)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err %v", name, err)
			}
			continue
		}
		if err != nil || p.Name != tc.want || tlsOn != tc.tls {
			t.Errorf("%s: %v tls=%v %v, want %s tls=%v", name, p, tlsOn, err, tc.want, tc.tls)
		}
	}
	if _, _, err := ChooseMember(cluster, []corev1.Pod{*terminating}, "db-bbbbb"); err == nil || !strings.Contains(err.Error(), "member db-bbbbb of cluster db has no ready Pod") {
		t.Errorf("named member not ready: %v", err)
	}
}

func TestEtcdctlArgsAndEnv(t *testing.T) {
	args, err := EtcdctlArgs("/run/s.sock", []string{"get", "--prefix", "a", "-w", "json"})
	if err != nil || strings.Join(args, " ") != "--endpoints=unix:///run/s.sock get --prefix a -w json" {
		t.Errorf("args %q, %v", args, err)
	}
	for _, bad := range [][]string{{"--cacert=/x", "get"}, {"get", "--key", "/k"}, {"--insecure-skip-tls-verify"}, {"--endpoints", "h"}} {
		if _, err := EtcdctlArgs("/s", bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	// After etcdctl's own "--" the words are data (a key may look like a flag).
	if _, err := EtcdctlArgs("/s", []string{"put", "--", "--key", "v"}); err != nil {
		t.Errorf("a key after --: %v", err)
	}
	env := EtcdctlEnv([]string{"PATH=/bin", "ETCDCTL_ENDPOINTS=x", "ETCDCTL_CERT=c", "ETCDCTL_WRITE_OUT=json", "HOME=/h"})
	if strings.Join(env, " ") != "PATH=/bin ETCDCTL_WRITE_OUT=json HOME=/h" {
		t.Errorf("env %q", env)
	}
}
