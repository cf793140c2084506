package testbed

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"steward.dev/steward/internal/testbed/localpath"
)

// corefile serves only the cluster domain: the test bed has no upstream DNS to forward to, and a query for
// anything else gets a quick failure instead of a timeout.
const corefile = `.:1053 {
    errors
    health :8080
    ready :8181
    kubernetes ` + ClusterDomain + ` in-addr.arpa ip6.arpa {
        pods insecure
    }
    cache 30
    reload
}
`

func (c *Cluster) installAddons(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.RESTConfig)
	if err != nil {
		return err
	}
	replicas := int32(c.opts.Nodes - c.opts.DedicatedNodes) //nolint:gosec // withDefaults keeps both within 0..maxNodes
	if err := createCoreDNS(ctx, cs, replicas); err != nil {
		return fmt.Errorf("install CoreDNS: %w", err)
	}
	volumeMode := storagev1.VolumeBindingWaitForFirstConsumer
	reclaim := corev1.PersistentVolumeReclaimDelete
	for _, sc := range []*storagev1.StorageClass{{
		ObjectMeta: metav1.ObjectMeta{Name: StorageClassName,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner:          ProvisionerName,
		VolumeBindingMode:    &volumeMode,
		ReclaimPolicy:        &reclaim,
		AllowVolumeExpansion: ptr.To(true),
	}, {
		ObjectMeta:           metav1.ObjectMeta{Name: FixedStorageClassName},
		Provisioner:          ProvisionerName,
		VolumeBindingMode:    &volumeMode,
		ReclaimPolicy:        &reclaim,
		AllowVolumeExpansion: ptr.To(false),
	}, {
		ObjectMeta:           metav1.ObjectMeta{Name: SizedStorageClassName},
		Provisioner:          ProvisionerName,
		Parameters:           map[string]string{localpath.ParameterMedium: localpath.MediumSized},
		VolumeBindingMode:    &volumeMode,
		ReclaimPolicy:        &reclaim,
		AllowVolumeExpansion: ptr.To(false),
	}} {
		if err := create(ctx, func() error {
			_, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{})
			return err
		}); err != nil {
			return fmt.Errorf("create StorageClass %s: %w", sc.Name, err)
		}
	}
	return c.waitFor(ctx, nil, "CoreDNS is available", 2*time.Minute, func(ctx context.Context) error {
		d, err := cs.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.AvailableReplicas < replicas {
			return fmt.Errorf("coredns has %d available replicas: %s", d.Status.AvailableReplicas, podProblems(ctx, cs, "kube-system", "k8s-app=kube-dns"))
		}
		return nil
	})
}

// podProblems summarises why pods are not ready, for the error message of a wait that timed out.
func podProblems(ctx context.Context, cs kubernetes.Interface, ns, selector string) string {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return err.Error()
	}
	out := ""
	for _, p := range pods.Items {
		out += fmt.Sprintf("pod %s phase %s", p.Name, p.Status.Phase)
		for _, s := range p.Status.ContainerStatuses {
			if s.State.Waiting != nil {
				out += fmt.Sprintf(" (%s waiting: %s %s)", s.Name, s.State.Waiting.Reason, s.State.Waiting.Message)
			}
			if s.LastTerminationState.Terminated != nil {
				out += fmt.Sprintf(" (%s last exit: %s)", s.Name, s.LastTerminationState.Terminated.Reason)
			}
		}
		out += "; "
	}
	return out
}

func create(_ context.Context, f func() error) error {
	if err := f(); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// createCoreDNS runs one CoreDNS replica per node that is not dedicated. Not on the dedicated nodes: a test stops
// and cuts those off, and a replica there would make a share of every other test's lookups time out until the
// node is NotReady; their pods reach the other nodes' replicas. It stays one function over 80 lines because it
// is CoreDNS's manifests as literals, read top to bottom like the YAML they stand for, then created in order.
func createCoreDNS(ctx context.Context, cs kubernetes.Interface, replicas int32) error {
	const ns, name = "kube-system", "coredns"
	labels := map[string]string{"k8s-app": "kube-dns"}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"Corefile": corefile}}
	dnsPort := func(name string, proto corev1.Protocol) corev1.ContainerPort {
		return corev1.ContainerPort{Name: name, ContainerPort: 1053, Protocol: proto}
	}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: name,
					DNSPolicy:          corev1.DNSDefault,
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
							LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, TopologyKey: "kubernetes.io/hostname"}}}},
					Containers: []corev1.Container{{
						Name:            "coredns",
						Image:           coreDNSImage,
						ImagePullPolicy: corev1.PullNever,
						Args:            []string{"-conf", "/etc/coredns/Corefile"},
						Ports:           []corev1.ContainerPort{dnsPort("dns", corev1.ProtocolUDP), dnsPort("dns-tcp", corev1.ProtocolTCP)},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: mustQuantity("50m"), corev1.ResourceMemory: mustQuantity("32Mi")}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8181)}},
							PeriodSeconds: 1},
						LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(8080)}}},
						SecurityContext: &corev1.SecurityContext{
							RunAsNonRoot:             ptr.To(true),
							ReadOnlyRootFilesystem:   ptr.To(true),
							AllowPrivilegeEscalation: ptr.To(false),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
						VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/coredns", ReadOnly: true}},
					}},
					Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
						ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}},
				},
			},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: ns, Labels: labels},
		Spec: corev1.ServiceSpec{
			ClusterIP: DNSServiceIP,
			Selector:  labels,
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(1053)},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(1053)},
			},
		},
	}
	steps := []func() error{
		func() error {
			_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
			return err
		},
		func() error { _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); return err },
		func() error { _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); return err },
		func() error {
			_, err := cs.AppsV1().Deployments(ns).Create(ctx, deploy, metav1.CreateOptions{})
			return err
		},
	}
	for _, s := range steps {
		if err := create(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }
