package resources

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// TestClientService: without spec.service a ClusterIP Service; with it, the template's type, labels, annotations,
// node port and policies, each only where its type has it, Steward's own labels, selector and port winning.
func TestClientService(t *testing.T) {
	plain := ClientService(testCluster())
	if plain.Spec.Type != corev1.ServiceTypeClusterIP || plain.Spec.Ports[0].NodePort != 0 || plain.Spec.ExternalTrafficPolicy != "" {
		t.Errorf("default client Service %+v, want ClusterIP without node port or policy", plain.Spec)
	}
	if plain.Spec.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Error("the client port has no protocol: server-side apply keys Service ports by port and protocol")
	}

	tmpl := &etcdv1alpha1.ClientServiceTemplate{
		Type:                     corev1.ServiceTypeLoadBalancer,
		Labels:                   map[string]string{"team": "db", LabelCluster: "other", "app.kubernetes.io/name": "mine"},
		Annotations:              map[string]string{"service.beta.kubernetes.io/aws-load-balancer-scheme": "internal"},
		NodePort:                 ptr.To[int32](31379),
		ExternalTrafficPolicy:    corev1.ServiceExternalTrafficPolicyLocal,
		LoadBalancerClass:        ptr.To("example.com/lb"),
		LoadBalancerSourceRanges: []string{"10.0.0.0/8"},
	}
	lb := ClientService(testCluster(func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Service = tmpl }))
	switch {
	case lb.Spec.Type != corev1.ServiceTypeLoadBalancer, lb.Spec.Ports[0].NodePort != 31379, lb.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal,
		ptr.Deref(lb.Spec.LoadBalancerClass, "") != "example.com/lb", len(lb.Spec.LoadBalancerSourceRanges) != 1:
		t.Errorf("LoadBalancer client Service %+v does not follow the template", lb.Spec)
	}
	if lb.Labels["team"] != "db" || lb.Labels[LabelCluster] != "db" || lb.Labels["app.kubernetes.io/name"] != "etcd" {
		t.Errorf("labels %v: the template's added, Steward's own winning", lb.Labels)
	}
	if lb.Spec.Selector[LabelCluster] != "db" || lb.Annotations["service.beta.kubernetes.io/aws-load-balancer-scheme"] != "internal" {
		t.Errorf("selector %v, annotations %v", lb.Spec.Selector, lb.Annotations)
	}
	if lb.Annotations[AnnotationServiceTemplate] == plain.Annotations[AnnotationServiceTemplate] {
		t.Error("the template's hash does not tell the templates apart")
	}

	// A NodePort Service has no load balancer settings, even while the spec (admission refuses it) would have them.
	np := ClientService(testCluster(func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Service = tmpl.DeepCopy()
		c.Spec.Service.Type = corev1.ServiceTypeNodePort
	}))
	if np.Spec.LoadBalancerClass != nil || np.Spec.LoadBalancerSourceRanges != nil || np.Spec.Ports[0].NodePort != 31379 {
		t.Errorf("NodePort client Service %+v", np.Spec)
	}
}

// TestClientServiceStale: the Service is applied again when the template changed (also by a removed key, which
// only the hash shows) or a field it sets was changed by hand, and not for what Kubernetes or others add.
func TestClientServiceStale(t *testing.T) {
	tmpl := &etcdv1alpha1.ClientServiceTemplate{Type: corev1.ServiceTypeNodePort, NodePort: ptr.To[int32](31379),
		Annotations: map[string]string{"a": "1", "b": "2"}, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal}
	cluster := testCluster(func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Service = tmpl })
	want := ClientService(cluster)
	current := func(mutate func(*corev1.Service)) *corev1.Service {
		s := want.DeepCopy()
		s.Spec.ClusterIP = "10.96.0.10"
		s.Annotations["cloud.example.com/id"] = "lb-1"
		mutate(s)
		return s
	}
	fewer := cluster.DeepCopy()
	delete(fewer.Spec.Service.Annotations, "b")
	tests := map[string]struct {
		have  *corev1.Service
		want  *corev1.Service
		stale bool
	}{
		"as applied, with what others added":  {current(func(*corev1.Service) {}), want, false},
		"an annotation removed from the spec": {current(func(*corev1.Service) {}), ClientService(fewer), true},
		"type changed by hand":                {current(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP }), want, true},
		"annotation changed by hand":          {current(func(s *corev1.Service) { s.Annotations["a"] = "x" }), want, true},
		"label removed by hand":               {current(func(s *corev1.Service) { delete(s.Labels, LabelCluster) }), want, true},
		"node port changed by hand":           {current(func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 30001 }), want, true},
		"policy changed by hand": {current(func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster }),
			want, true},
		"allocated node port kept": {
			have: func() *corev1.Service {
				s := ClientService(testCluster(func(c *etcdv1alpha1.EtcdCluster) {
					c.Spec.Service = &etcdv1alpha1.ClientServiceTemplate{Type: corev1.ServiceTypeNodePort}
				}))
				s.Spec.Ports[0].NodePort = 30555
				s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
				return s
			}(),
			want: ClientService(testCluster(func(c *etcdv1alpha1.EtcdCluster) {
				c.Spec.Service = &etcdv1alpha1.ClientServiceTemplate{Type: corev1.ServiceTypeNodePort}
			})),
		},
		"from before spec.service": {
			have: func() *corev1.Service {
				s := ClientService(testCluster())
				delete(s.Annotations, AnnotationServiceTemplate)
				return s
			}(),
			want: ClientService(testCluster()), stale: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			why := ClientServiceStale(tc.have, tc.want)
			if (why != "") != tc.stale {
				t.Errorf("ClientServiceStale = %q, want stale %v", why, tc.stale)
			}
		})
	}
}

// TestExternalAccessOf: nothing for a ClusterIP Service; the node port, and the load balancer's addresses as
// client URLs of the cluster's scheme.
func TestExternalAccessOf(t *testing.T) {
	cluster := testCluster()
	if a := ExternalAccessOf(cluster, ClientService(cluster)); a != nil {
		t.Errorf("ClusterIP Service: %+v, want nil", a)
	}
	svc := ClientService(testCluster(func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Service = &etcdv1alpha1.ClientServiceTemplate{Type: corev1.ServiceTypeLoadBalancer}
	}))
	svc.Spec.Ports[0].NodePort = 31000
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.7"}, {Hostname: "lb.example.com"}, {IP: "2001:db8::7"}, {}}
	a := ExternalAccessOf(cluster, svc)
	want := []string{"https://192.0.2.7:2379", "https://lb.example.com:2379", "https://[2001:db8::7]:2379"}
	if a == nil || a.Type != corev1.ServiceTypeLoadBalancer || a.NodePort != 31000 || len(a.LoadBalancer) != 3 ||
		a.LoadBalancer[0] != want[0] || a.LoadBalancer[1] != want[1] || a.LoadBalancer[2] != want[2] {
		t.Errorf("ExternalAccessOf = %+v, want node port 31000 and %v", a, want)
	}
}
