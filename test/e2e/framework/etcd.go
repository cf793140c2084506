package framework

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/internal/testbed"
)

// ClusterTLS is ClusterTLSConfig for a test, waiting for the Secret to appear.
func ClusterTLS(t *testing.T, c *etcdv1alpha1.EtcdCluster) *tls.Config {
	t.Helper()
	var cfg *tls.Config
	Poll(t, "client Secret of "+c.Name, time.Minute, func() error {
		var err error
		cfg, err = ClusterTLSConfig(c)
		return err
	})
	return cfg
}

// ClusterTLSConfig is what a test dials a cluster's members with: the client Secret Steward issued (CA,
// certificate, key), checking members for the client Service's name as Steward does, since tests dial Pod and
// Service IPs. nil for a plaintext cluster.
func ClusterTLSConfig(c *etcdv1alpha1.EtcdCluster) (*tls.Config, error) {
	if !resources.TLSEnabled(c) {
		return nil, nil
	}
	var s corev1.Secret
	if err := K8s.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: resources.ClientSecretName(c)}, &s); err != nil {
		return nil, err
	}
	t := &etcd.TLS{CA: s.Data[resources.SecretCAKey], Cert: s.Data[resources.SecretCertKey], Key: s.Data[resources.SecretKeyKey],
		ServerName: resources.ClientServiceHost(c, OperatorOptions)}
	return t.Config()
}

// MemberClient is a client of every member of c, by Pod IP, and those endpoints by member name. The caller closes it.
func MemberClient(t *testing.T, c *etcdv1alpha1.EtcdCluster) (*clientv3.Client, map[string]string) {
	t.Helper()
	eps := MemberEndpoints(t, c)
	var list []string
	for _, ep := range eps {
		list = append(list, ep)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: list, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), TLS: ClusterTLS(t, c)})
	if err != nil {
		t.Fatal(err)
	}
	return cli, eps
}

// AnyEndpoint is one of eps (the first by member name).
func AnyEndpoint(eps map[string]string) string {
	first := ""
	for name := range eps {
		if first == "" || name < first {
			first = name
		}
	}
	return eps[first]
}

// ClientServiceURL is the client Service's address by ClusterIP (the test process does not use cluster DNS).
func ClientServiceURL(t *testing.T, c *etcdv1alpha1.EtcdCluster) string {
	t.Helper()
	var svc corev1.Service
	if err := K8s.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: resources.ClientServiceName(c)}, &svc); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("%s:%d", svc.Spec.ClusterIP, resources.ClientPort)
	WaitServiceRouted(t, c, addr)
	return fmt.Sprintf("%s://%s", resources.Scheme(c), addr)
}

// WaitServiceRouted waits until a connection to addr, the client Service's ClusterIP and port, reaches etcd.
// kube-proxy programs a new Service on the node a moment after the API server has it, later on a loaded machine;
// until then a connection to the ClusterIP leaves by the default route, and on the machines the tests run on an
// egress proxy answers it: an HTTP/2 404, which a gRPC client reports as Unimplemented ("unexpected HTTP status
// code received from server: 404"). Steward cannot see kube-proxy's progress, so its status does not cover this.
func WaitServiceRouted(t *testing.T, c *etcdv1alpha1.EtcdCluster, addr string) {
	t.Helper()
	if err := testbed.Eventually(context.Background(), 2*time.Minute, 500*time.Millisecond, func() error { return ReachesEtcd(c, addr) }); err != nil {
		t.Fatalf("the client Service's ClusterIP %s routed to etcd: %v; %s", addr, err, ServiceRouting(c, addr))
	}
}

// WriteAndReadThroughService writes and reads keys through the client Service's ClusterIP.
func WriteAndReadThroughService(t *testing.T, c *etcdv1alpha1.EtcdCluster) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ClientServiceURL(t, c)}, DialTimeout: 5 * time.Second, TLS: ClusterTLS(t, c)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	for i := 0; i < 20; i++ {
		key, val := fmt.Sprintf("e2e/%d", i), fmt.Sprintf("value-%d", i)
		Poll(t, "write "+key+" through the client Service", 30*time.Second, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := cli.Put(ctx, key, val)
			return err
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "e2e/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 20 {
		t.Fatalf("read back %d keys through the client Service, want 20", len(resp.Kvs))
	}
}

// ReadKeysFromMember reads the keys WriteAndReadThroughService wrote from one member, serializably (its own
// data, not the leader's).
func ReadKeysFromMember(t *testing.T, c *etcdv1alpha1.EtcdCluster, member string) {
	t.Helper()
	ep := MemberEndpoints(t, c)[member]
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, TLS: ClusterTLS(t, c)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	Poll(t, "member "+member+" serves the keys written before", time.Minute, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := cli.Get(ctx, "e2e/", clientv3.WithPrefix(), clientv3.WithSerializable())
		if err != nil {
			return err
		}
		if len(resp.Kvs) != 20 {
			return fmt.Errorf("%d keys, want 20", len(resp.Kvs))
		}
		return nil
	})
}

// ServedCertificate is the certificate a member presents on its client port.
func ServedCertificate(cfg *tls.Config, addr string) (*x509.Certificate, error) {
	d := &net.Dialer{Timeout: 3 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().PeerCertificates[0], nil
}

// PodAddrs maps the member Pods of c to their client address (pod IP and client port).
func PodAddrs(t *testing.T, c *etcdv1alpha1.EtcdCluster) map[string]string {
	t.Helper()
	pods := MemberPodsOf(t, c)
	out := map[string]string{}
	for _, p := range pods.Items {
		out[p.Name] = net.JoinHostPort(p.Status.PodIP, fmt.Sprint(resources.ClientPort))
	}
	return out
}

// RequireRefused fails unless a put with cfg (nil: plaintext) to endpoint fails.
func RequireRefused(t *testing.T, what, endpoint string, cfg *tls.Config) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 2 * time.Second, Logger: zap.NewNop(), TLS: cfg})
	if err != nil {
		return // refused at dial
	}
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "e2e/intruder", "x"); err == nil {
		t.Fatalf("%s: a put to %s succeeded", what, endpoint)
	}
}

// ReachesEtcd checks that addr is served by etcd: in plaintext, etcd's /version answer; with TLS, a handshake in
// which the server proves a certificate of the cluster's CA.
func ReachesEtcd(c *etcdv1alpha1.EtcdCluster, addr string) error {
	if !resources.TLSEnabled(c) {
		// A connection of its own each time: one kept alive from a try before kube-proxy programmed the
		// Service would go on reaching whatever answered that try (docs/development/flakes.md).
		hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := hc.Get("http://" + addr + "/version")
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"etcdserver"`)) {
			return fmt.Errorf("GET /version: %s, server %q, body %q: not etcd", resp.Status, resp.Header.Get("Server"), body)
		}
		return nil
	}
	cfg, err := ClusterTLSConfig(c)
	if err != nil {
		return err
	}
	_, err = ServedCertificate(cfg, addr)
	return err
}

// ServiceRouting says what stands between addr and etcd, for a failure message: the client Service's ClusterIP
// now, its endpoints, and how many of this node's nat rules name addr's IP (none: kube-proxy has not programmed
// the Service, and a connection leaves by the default route).
func ServiceRouting(c *etcdv1alpha1.EtcdCluster, addr string) string {
	ctx := context.Background()
	name := resources.ClientServiceName(c)
	var parts []string
	var svc corev1.Service
	if err := K8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, &svc); err != nil {
		parts = append(parts, "Service: "+err.Error())
	} else {
		parts = append(parts, "Service ClusterIP now "+svc.Spec.ClusterIP)
	}
	var eps discoveryv1.EndpointSliceList
	if err := K8s.List(ctx, &eps, client.InNamespace(c.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: name}); err != nil {
		parts = append(parts, "EndpointSlices: "+err.Error())
	} else {
		var ready, notReady []string
		for _, s := range eps.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready {
					ready = append(ready, e.Addresses...)
				} else {
					notReady = append(notReady, e.Addresses...)
				}
			}
		}
		parts = append(parts, fmt.Sprintf("endpoints ready %v, not ready %v", ready, notReady))
	}
	ip, _, _ := net.SplitHostPort(addr)
	if out, err := exec.Command("iptables-save", "-t", "nat").Output(); err != nil {
		parts = append(parts, "iptables-save: "+err.Error())
	} else {
		parts = append(parts, fmt.Sprintf("nat rules naming %s on this node: %d", ip, strings.Count(string(out), " "+ip+"/32 ")))
	}
	return strings.Join(parts, "; ")
}

// Identities are the members' etcd IDs and their volumes' UIDs: a switch restarts members, it never replaces one.
func Identities(t *testing.T, c *etcdv1alpha1.EtcdCluster) string {
	t.Helper()
	var pvcs corev1.PersistentVolumeClaimList
	if err := K8s.List(context.Background(), &pvcs, client.InNamespace(c.Namespace), client.MatchingLabels{resources.LabelCluster: c.Name}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range c.Status.Members {
		out = append(out, m.Name+"="+m.ID)
	}
	for _, p := range pvcs.Items {
		out = append(out, p.Name+"="+string(p.UID))
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}
