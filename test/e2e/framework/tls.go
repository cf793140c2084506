package framework

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/test/linearizability"
)

// ServiceTargets are the two ways a client reaches the cluster's Service while it switches: plaintext and TLS
// with the client Secret (read on first use: Steward issues it once the switch to TLS begins).
func ServiceTargets(t *testing.T, c *etcdv1alpha1.EtcdCluster) (plain, secure linearizability.Target) {
	t.Helper()
	var svc corev1.Service
	if err := K8s.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: resources.ClientServiceName(c)}, &svc); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("%s:%d", svc.Spec.ClusterIP, resources.ClientPort)
	WaitServiceRouted(t, c, addr)
	withTLS := c.DeepCopy()
	withTLS.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderSteward}
	return linearizability.Target{Endpoints: []string{"http://" + addr}},
		linearizability.Target{Endpoints: []string{"https://" + addr}, TLSFrom: func() (*tls.Config, error) { return ClusterTLSConfig(withTLS) }}
}

// WaitMembersTLS waits until the cluster has settled with every member in TLS mode mode.
func WaitMembersTLS(t *testing.T, key client.ObjectKey, mode string, timeout time.Duration) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	Poll(t, "every member of "+key.String()+" in TLS mode "+mode, timeout, func() error {
		var c etcdv1alpha1.EtcdCluster
		if err := K8s.Get(context.Background(), key, &c); err != nil {
			return err
		}
		for _, m := range c.Status.Members {
			if m.TLS != mode {
				return fmt.Errorf("member %s is %q (%s)", m.Name, m.TLS, Describe(&c))
			}
		}
		return nil
	})
	return WaitSettled(t, key, 2*time.Minute)
}

// WatchSwitch watches the TLS mode of the member Pods of cluster key while a test switches it, until Finish.
func WatchSwitch(t *testing.T, key client.ObjectKey) *SwitchWatch {
	t.Helper()
	w := &SwitchWatch{modes: map[string][]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	// The modes before the change: the first restart may come before the first tick.
	var pods corev1.PodList
	if err := K8s.List(context.Background(), &pods, client.InNamespace(key.Namespace), client.MatchingLabels{resources.LabelCluster: key.Name}); err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		mode, _ := resources.PodTLS(&pods.Items[i])
		w.modes[pods.Items[i].Name] = []string{mode}
	}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			var c etcdv1alpha1.EtcdCluster
			var pods corev1.PodList
			errC := K8s.Get(ctx, key, &c)
			errP := K8s.List(ctx, &pods, client.InNamespace(key.Namespace), client.MatchingLabels{resources.LabelCluster: key.Name})
			cancel()
			if errC != nil || errP != nil {
				continue
			}
			w.mu.Lock()
			if cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionAvailable); cond != nil && cond.Status != "True" {
				w.unavailable = append(w.unavailable, cond.Reason+": "+cond.Message)
			}
			kinds := map[string]string{}
			for i := range pods.Items {
				p := &pods.Items[i]
				if p.DeletionTimestamp != nil {
					continue
				}
				mode, _ := resources.PodTLS(p)
				kinds[mode] = p.Name
				if h := w.modes[p.Name]; len(h) == 0 || h[len(h)-1] != mode {
					w.modes[p.Name] = append(h, mode)
				}
			}
			if kinds[resources.MemberTLSPlaintext] != "" && kinds[resources.MemberTLSOn] != "" {
				w.mixed = append(w.mixed, fmt.Sprintf("%s plaintext while %s serves TLS", kinds[resources.MemberTLSPlaintext], kinds[resources.MemberTLSOn]))
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// RequirePeerPort checks every member's peer port: the certificates in refused get no 2xx answer on any path
// (a refused handshake or an error status), and the member's own certificate (the positive control: the port is
// reached and the test's TLS is right) gets 200.
func RequirePeerPort(t *testing.T, c *etcdv1alpha1.EtcdCluster, roots *x509.CertPool, refused map[string]tls.Certificate) {
	t.Helper()
	pods := MemberPodsOf(t, c)
	for i := range pods.Items {
		p := &pods.Items[i]
		member, _ := SecretPair(t, c.Namespace, resources.MemberSecretName(p.Name))
		if code, err := PeerPortAnswer(c, p, roots, member, "/members"); err != nil || code != http.StatusOK {
			t.Fatalf("member %s's own certificate on its peer port: %d %v", p.Name, code, err)
		}
		for who, cert := range refused {
			for _, path := range PeerPaths {
				code, err := PeerPortAnswer(c, p, roots, cert, path)
				if err == nil && code < 300 {
					t.Errorf("%s's certificate on the peer port of %s: %s answered %d", who, p.Name, path, code)
				}
			}
		}
	}
}

// SecretPair is the certificate and key of a kubernetes.io/tls Secret, and the CA certificates in its ca.crt.
func SecretPair(t *testing.T, ns, name string) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	var s corev1.Secret
	Poll(t, "Secret "+name, time.Minute, func() error {
		return K8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &s)
	})
	pair, err := tls.X509KeyPair(s.Data[resources.SecretCertKey], s.Data[resources.SecretKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(s.Data[resources.SecretCAKey])
	return pair, roots
}

// SwitchWatch follows a cluster while it switches between plaintext and TLS: whether Available ever went False,
// the TLS modes its members passed through, and whether a plaintext member and a TLS member (which cannot talk
// to each other) ever ran at the same time.
type SwitchWatch struct {
	mu          sync.Mutex
	unavailable []string
	modes       map[string][]string
	mixed       []string
	stop        chan struct{}
	done        chan struct{}
}

// Finish stops watching and fails the test if the cluster was ever unavailable or mixed plaintext and TLS members;
// it returns each member's modes in order.
func (w *SwitchWatch) Finish(t *testing.T, during string) map[string][]string {
	t.Helper()
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.unavailable) > 0 {
		t.Errorf("%s: the cluster was not Available %d times, first: %s", during, len(w.unavailable), w.unavailable[0])
	}
	if len(w.mixed) > 0 {
		t.Errorf("%s: a plaintext member ran beside a TLS member: %v", during, w.mixed[0])
	}
	return w.modes
}

// PeerPortAnswer asks a member's peer port (by Pod IP) for path with cert, checking the member's certificate for
// its own DNS name as its peers do: the HTTP status, or the error (a refused TLS handshake).
func PeerPortAnswer(c *etcdv1alpha1.EtcdCluster, pod *corev1.Pod, roots *x509.CertPool, cert tls.Certificate, path string) (int, error) {
	cfg := &tls.Config{RootCAs: roots, ServerName: resources.MemberHost(c, pod.Name, OperatorOptions), Certificates: []tls.Certificate{cert},
		MinVersion: tls.VersionTLS12}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
	resp, err := hc.Get("https://" + net.JoinHostPort(pod.Status.PodIP, fmt.Sprint(resources.PeerPort)) + path)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// PeerPaths are what etcd's peer port serves to any certificate it accepts: the member list, the version and
// the raft prober; the raft stream itself is behind the same check.
var PeerPaths = []string{"/members", "/version", "/raft/probing"}
