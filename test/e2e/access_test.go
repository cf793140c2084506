package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/internal/testbed"
	"steward.dev/steward/test/e2e/framework"
)

// externalName is the DNS name the test's client outside the cluster dials the members by.
const externalName = "etcd.edge.example"

// TestExternalClientThroughServiceTemplate: a client on the test bed's host, outside the pod network, reaches a
// 3-member cluster with authentication on through the node port of a NodePort client Service (spec.service), with
// an EtcdUser's certificate. Before spec.tls.extraSANs names the node's address and the client's DNS name, the
// members' certificates are refused for them; with it, every member serves a re-issued certificate without a
// restart, and the client writes under its prefix (and not outside it) by the address and by the name. The
// Service follows the template's changes (an annotation dropped, one added, a fixed node port) and keeps what
// others put on it; a node port the API server refuses is reported as Degraded ClientServiceRefused while clients
// are served as before. As a LoadBalancer Service, given an address by the test (in a cloud's controller's place),
// status lists the load balancer's URL and a client reaches the members through it (kube-proxy routes it); back
// to ClusterIP, the node port is gone. All under client load, no write lost.
func TestExternalClientThroughServiceTemplate(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "edge")
	framework.StartOperator(t, ns)
	c := framework.NewCluster(ns, "edge", 3)
	c.Spec.Auth = &etcdv1alpha1.AuthSpec{Enabled: true}
	c.Spec.Service = &etcdv1alpha1.ClientServiceTemplate{Type: corev1.ServiceTypeNodePort,
		Labels:      map[string]string{"exposure": "external"},
		Annotations: map[string]string{"example.com/owner": "team-db", "example.com/tier": "gold"}}
	key, _ := framework.Settle(t, c)
	c = framework.WaitAuthEnabled(t, key, true)
	app := framework.NewEtcdUser(ns, "app", c.Name, "/tenant/", etcdv1alpha1.AccessReadWrite, false)
	framework.CreateUsersReady(t, map[string]*etcdv1alpha1.EtcdUser{"app": app})
	cert, roots := framework.SecretPair(t, ns, app.Spec.Certificate.SecretName)

	svc := clientService(t, c)
	nodePort := resources.ClientNodePort(svc)
	if svc.Spec.Type != corev1.ServiceTypeNodePort || nodePort == 0 || svc.Labels["exposure"] != "external" || svc.Annotations["example.com/owner"] != "team-db" {
		t.Fatalf("client Service %s: type %s, node port %d, labels %v, annotations %v; want the template's", svc.Name, svc.Spec.Type, nodePort, svc.Labels, svc.Annotations)
	}
	if a := c.Status.ExternalAccess; a == nil || a.Type != corev1.ServiceTypeNodePort || a.NodePort != nodePort {
		t.Errorf("status.externalAccess %+v, want NodePort %d", a, nodePort)
	}
	// Someone else's annotation (a cloud controller's, a human's): Steward leaves it.
	patch := client.MergeFrom(svc.DeepCopy())
	svc.Annotations["cloud.example.com/lb-id"] = "lb-42"
	if err := framework.K8s.Patch(ctx, svc, patch); err != nil {
		t.Fatal(err)
	}

	load := framework.StartLoad(t, c)
	restarts := framework.ContainerRestarts(t, key)
	pods := framework.PodUIDs(t, c)
	external := net.JoinHostPort(testbed.NodeIP, strconv.Itoa(int(nodePort)))
	clientTLS := func(serverName string) *tls.Config {
		return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12}
	}
	// Reached through the node port, but the members' certificates name neither the node's address nor the name.
	framework.Poll(t, "the node port routed", time.Minute, func() error {
		_, err := framework.ServedCertificate(clientTLS(resources.ClientServiceHost(c, framework.OperatorOptions)), external)
		return err
	})
	for _, name := range []string{testbed.NodeIP, externalName} {
		_, err := framework.ServedCertificate(clientTLS(name), external)
		var hostErr x509.HostnameError
		if !errors.As(err, &hostErr) {
			t.Fatalf("dialing %s as %s before extraSANs: %v, want the certificate refused for the name", external, name, err)
		}
	}

	began := time.Now()
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.TLS.ExtraSANs = &etcdv1alpha1.ExtraSANs{DNSNames: []string{externalName}, IPAddresses: []string{testbed.NodeIP}}
		delete(c.Spec.Service.Annotations, "example.com/tier")
		c.Spec.Service.Annotations["example.com/exposed-by"] = "steward"
		c.Spec.Service.NodePort = ptr.To(nodePort)
	})
	framework.Poll(t, "every member serving a certificate for the node's address and the name", 4*time.Minute, func() error {
		for member, addr := range framework.PodAddrs(t, c) {
			served, err := framework.ServedCertificate(clientTLS(resources.ClientServiceHost(c, framework.OperatorOptions)), addr)
			if err != nil {
				return err
			}
			for _, name := range []string{testbed.NodeIP, externalName} {
				if err := served.VerifyHostname(name); err != nil {
					return fmt.Errorf("member %s: %w", member, err)
				}
			}
		}
		return nil
	})
	t.Logf("extraSANs: every member serving them %s after the change", time.Since(began).Round(time.Second))

	// Outside the cluster, as a kube-apiserver on a VM would: by the node's address, then by the name (which the
	// client's dialer resolves to the node's address, as DNS would; etcd's client checks the endpoint's host).
	for _, host := range []string{testbed.NodeIP, externalName} {
		cli := externalClient(t, host, nodePort, external, cert, roots)
		who := "the external client by " + host
		framework.MayWrite(t, who, cli, "/tenant/from-outside", true)
		framework.MayRead(t, who, cli, "/tenant/from-outside", true)
		framework.MayRead(t, who, cli, "/other/secret", false)
		_ = cli.Close()
	}

	svc = clientService(t, c)
	if _, kept := svc.Annotations["example.com/tier"]; kept || svc.Annotations["example.com/exposed-by"] != "steward" ||
		svc.Annotations["cloud.example.com/lb-id"] != "lb-42" || resources.ClientNodePort(svc) != nodePort {
		t.Errorf("client Service annotations %v, node port %d: want the template's (example.com/tier dropped), the others' kept, node port %d",
			svc.Annotations, resources.ClientNodePort(svc), nodePort)
	}
	if events := framework.EventsOf(t, c, "ClientServiceUpdated", began); len(events) == 0 {
		t.Error("no ClientServiceUpdated Event for the template's change")
	}

	// A load balancer: the test plays the cloud's controller and gives the Service an address, which kube-proxy
	// routes to the members like a cloud's load balancer would; status lists its client URL, and a client that
	// resolves the name to that address is served.
	const loadBalancerIP = "10.245.2.10"
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Service.Type = corev1.ServiceTypeLoadBalancer })
	framework.Poll(t, "the load balancer's address in the Service's status", time.Minute, func() error {
		svc := clientService(t, c)
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			return fmt.Errorf("type %s", svc.Spec.Type)
		}
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: loadBalancerIP}}
		return framework.K8s.Status().Update(ctx, svc)
	})
	wantURL := "https://" + net.JoinHostPort(loadBalancerIP, strconv.Itoa(resources.ClientPort))
	framework.Poll(t, "status.externalAccess with the load balancer's URL", time.Minute, func() error {
		got := &etcdv1alpha1.EtcdCluster{}
		if err := framework.K8s.Get(ctx, key, got); err != nil {
			return err
		}
		if a := got.Status.ExternalAccess; a == nil || a.Type != corev1.ServiceTypeLoadBalancer || a.NodePort != nodePort ||
			len(a.LoadBalancer) != 1 || a.LoadBalancer[0] != wantURL {
			return fmt.Errorf("status.externalAccess %+v, want LoadBalancer %s on node port %d", a, wantURL, nodePort)
		}
		return nil
	})
	balanced := net.JoinHostPort(loadBalancerIP, strconv.Itoa(resources.ClientPort))
	framework.Poll(t, "the load balancer's address routed", time.Minute, func() error {
		_, err := framework.ServedCertificate(clientTLS(externalName), balanced)
		return err
	})
	lb := externalClient(t, externalName, resources.ClientPort, balanced, cert, roots)
	framework.MayWrite(t, "the external client through the load balancer", lb, "/tenant/through-the-load-balancer", true)
	_ = lb.Close()

	// A node port the API server refuses: reported, and clients are served through the Service as it was.
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Service.NodePort = ptr.To[int32](80) })
	framework.WaitDegraded(t, key, etcdv1alpha1.ReasonClientServiceRefused, "spec.service", "80")
	if _, err := framework.ServedCertificate(clientTLS(""), external); err != nil {
		t.Errorf("the node port %d while the change is refused: %v", nodePort, err)
	}

	// Back inside: a ClusterIP Service, no node port, no external access in status.
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Service = &etcdv1alpha1.ClientServiceTemplate{Type: corev1.ServiceTypeClusterIP}
	})
	framework.Poll(t, "a ClusterIP client Service", time.Minute, func() error {
		svc := clientService(t, c)
		if svc.Spec.Type != corev1.ServiceTypeClusterIP || resources.ClientNodePort(svc) != 0 {
			return fmt.Errorf("type %s, node port %d", svc.Spec.Type, resources.ClientNodePort(svc))
		}
		return nil
	})
	got := framework.WaitSettled(t, key, 2*time.Minute)
	if got.Status.ExternalAccess != nil {
		t.Errorf("status.externalAccess %+v for a ClusterIP Service", got.Status.ExternalAccess)
	}
	framework.RequireNoLostWrites(t, load, "re-issuing certificates for extraSANs and changing the client Service")
	framework.RequireNoRestarts(t, key, restarts, "re-issuing certificates for extraSANs")
	if now := framework.PodUIDs(t, got); fmt.Sprint(now) != fmt.Sprint(pods) {
		t.Errorf("member Pods replaced: before %v, after %v", pods, now)
	}
	framework.DeleteAndCheckNothingLeft(t, got)
}

// externalClient is an etcd client of an application outside the cluster holding cert: its endpoint is host and
// port, which it checks the members' certificates against, and its connections go to addr, where a DNS record of
// host would send them.
func externalClient(t *testing.T, host string, port int32, addr string, cert tls.Certificate, roots *x509.CertPool) *clientv3.Client {
	t.Helper()
	dial := func(ctx context.Context, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"https://" + net.JoinHostPort(host, strconv.Itoa(int(port)))},
		DialTimeout: 5 * time.Second, Logger: zap.NewNop(), DialOptions: []grpc.DialOption{grpc.WithContextDialer(dial)},
		TLS: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots, MinVersion: tls.VersionTLS12}})
	if err != nil {
		t.Fatal(err)
	}
	return cli
}

func clientService(t *testing.T, c *etcdv1alpha1.EtcdCluster) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{}
	if err := framework.K8s.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: resources.ClientServiceName(c)}, svc); err != nil {
		t.Fatal(err)
	}
	return svc
}
