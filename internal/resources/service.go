package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// AnnotationServiceTemplate is on the client Service: a hash of the spec.service it was last shaped by. A template
// changed since, a key removed from it included, shows as another hash.
const AnnotationServiceTemplate = "etcd.steward.dev/service-template"

// Hash is a short, stable digest of v's JSON: a mark that an object was made from the same settings.
func Hash(v any) string {
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// ClientService is the Service clients use; it routes to ready members only. spec.service gives its type, labels,
// annotations, node port and traffic policy; Steward's labels, selector and port win. It holds only the fields
// Steward sets: applied with server-side apply, fields Kubernetes or a cloud's controller set stay theirs.
func ClientService(cluster *etcdv1alpha1.EtcdCluster) *corev1.Service {
	t := cluster.Spec.Service
	if t == nil {
		t = &etcdv1alpha1.ClientServiceTemplate{}
	}
	labels := maps.Clone(t.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, ClusterLabels(cluster))
	annotations := maps.Clone(t.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[AnnotationServiceTemplate] = Hash(cluster.Spec.Service)
	port := corev1.ServicePort{Name: "client", Protocol: corev1.ProtocolTCP, Port: ClientPort, TargetPort: intstr.FromInt32(ClientPort)}
	svcType := t.Type
	if svcType == "" {
		svcType = corev1.ServiceTypeClusterIP
	}
	svc := &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Name: ClientServiceName(cluster), Namespace: cluster.Namespace, Labels: labels, Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{ownerRef(cluster)},
		},
		Spec: corev1.ServiceSpec{
			Type:     svcType,
			Selector: ClusterLabels(cluster),
		},
	}
	if svcType != corev1.ServiceTypeClusterIP {
		if t.NodePort != nil {
			port.NodePort = *t.NodePort
		}
		svc.Spec.ExternalTrafficPolicy = t.ExternalTrafficPolicy
	}
	if svcType == corev1.ServiceTypeLoadBalancer {
		svc.Spec.LoadBalancerClass = t.LoadBalancerClass
		svc.Spec.LoadBalancerSourceRanges = t.LoadBalancerSourceRanges
	}
	svc.Spec.Ports = []corev1.ServicePort{port}
	return svc
}

// ClientServiceStale reports why the client Service have is not what want (ClientService) asks for, or "" when it
// is: shaped by another template, or changed by hand since in a field the template sets.
func ClientServiceStale(have, want *corev1.Service) string {
	switch {
	case have.Annotations[AnnotationServiceTemplate] != want.Annotations[AnnotationServiceTemplate]:
		return "spec.service changed"
	case have.Spec.Type != want.Spec.Type:
		return fmt.Sprintf("type is %s, not %s", have.Spec.Type, want.Spec.Type)
	case !contains(have.Labels, want.Labels):
		return "labels changed"
	case !contains(have.Annotations, want.Annotations):
		return "annotations changed"
	case want.Spec.ExternalTrafficPolicy != "" && have.Spec.ExternalTrafficPolicy != want.Spec.ExternalTrafficPolicy:
		return fmt.Sprintf("externalTrafficPolicy is %s, not %s", have.Spec.ExternalTrafficPolicy, want.Spec.ExternalTrafficPolicy)
	case !slices.Equal(have.Spec.LoadBalancerSourceRanges, want.Spec.LoadBalancerSourceRanges):
		return "loadBalancerSourceRanges changed"
	}
	if np := want.Spec.Ports[0].NodePort; np != 0 && ClientNodePort(have) != np {
		return fmt.Sprintf("node port is %d, not %d", ClientNodePort(have), np)
	}
	return ""
}

func contains(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// ClientNodePort is the node port of a client Service's client port, 0 without one.
func ClientNodePort(svc *corev1.Service) int32 {
	for _, p := range svc.Spec.Ports {
		if p.Port == ClientPort {
			return p.NodePort
		}
	}
	return 0
}

// ExternalAccessOf is how clients outside the Kubernetes cluster reach the client Service svc: nil for a
// ClusterIP Service (or none), else its node port and its load balancer's addresses as client URLs.
func ExternalAccessOf(cluster *etcdv1alpha1.EtcdCluster, svc *corev1.Service) *etcdv1alpha1.ExternalAccess {
	if svc == nil || svc.Spec.Type == corev1.ServiceTypeClusterIP || svc.Spec.Type == "" {
		return nil
	}
	access := &etcdv1alpha1.ExternalAccess{Type: svc.Spec.Type, NodePort: ClientNodePort(svc)}
	for _, in := range svc.Status.LoadBalancer.Ingress {
		host := in.Hostname
		if in.IP != "" {
			host = in.IP
		}
		if host == "" {
			continue
		}
		access.LoadBalancer = append(access.LoadBalancer, fmt.Sprintf("%s://%s", Scheme(cluster), net.JoinHostPort(host, strconv.Itoa(ClientPort))))
	}
	return access
}
