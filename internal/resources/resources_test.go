package resources

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/pitr"
)

var opts = Options{ImageRepository: "steward.local/etcd", ClusterDomain: "cluster.local"}

func testCluster(mutate ...func(*etcdv1alpha1.EtcdCluster)) *etcdv1alpha1.EtcdCluster {
	c := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "prod", UID: "uid-1"},
		Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: 3, Version: "3.6.16",
			Storage: etcdv1alpha1.StorageSpec{Size: resource.MustParse("2Gi")}},
	}
	for _, m := range mutate {
		m(c)
	}
	return c
}

var boot = Member{Name: "db-abcde", State: "new", InitialCluster: map[string]string{
	"db-abcde": "https://db-abcde.db-peer.prod.svc.cluster.local:2380",
	"db-fghjk": "https://db-fghjk.db-peer.prod.svc.cluster.local:2380",
}}

func arg(args []string, flag string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v, true
		}
	}
	return "", false
}

func TestMemberPod(t *testing.T) {
	tests := map[string]struct {
		cluster *etcdv1alpha1.EtcdCluster
		check   func(t *testing.T, p *corev1.Pod)
	}{
		"identity, addresses and bootstrap flags": {
			cluster: testCluster(),
			check: func(t *testing.T, p *corev1.Pod) {
				args := p.Spec.Containers[0].Command
				want := map[string]string{
					"--name":                        "db-abcde",
					"--initial-advertise-peer-urls": "https://db-abcde.db-peer.prod.svc.cluster.local:2380",
					"--advertise-client-urls":       "https://db-abcde.db-peer.prod.svc.cluster.local:2379",
					"--initial-cluster":             "db-abcde=https://db-abcde.db-peer.prod.svc.cluster.local:2380,db-fghjk=https://db-fghjk.db-peer.prod.svc.cluster.local:2380",
					"--initial-cluster-state":       "new",
					"--initial-cluster-token":       "uid-1",
					"--data-dir":                    "/var/lib/etcd/data",
				}
				for flag, v := range want {
					if got, _ := arg(args, flag); got != v {
						t.Errorf("%s = %q, want %q", flag, got, v)
					}
				}
				if p.Spec.Hostname != "db-abcde" || p.Spec.Subdomain != "db-peer" {
					t.Errorf("hostname %s subdomain %s", p.Spec.Hostname, p.Spec.Subdomain)
				}
				if p.Spec.Containers[0].Image != "steward.local/etcd:v3.6.16" {
					t.Errorf("image %s", p.Spec.Containers[0].Image)
				}
				if p.Annotations[AnnotationInitialCluster] == "" || p.Annotations[AnnotationVersion] != "3.6.16" {
					t.Errorf("annotations %v", p.Annotations)
				}
				if p.Labels[LabelCluster] != "db" || p.Labels[LabelMember] != "db-abcde" {
					t.Errorf("labels %v", p.Labels)
				}
				if len(p.OwnerReferences) != 1 || !ptr.Deref(p.OwnerReferences[0].Controller, false) || p.OwnerReferences[0].UID != "uid-1" {
					t.Errorf("owner references %v", p.OwnerReferences)
				}
				if v := p.Spec.Volumes[0]; v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "db-abcde-data" {
					t.Errorf("data volume %+v", v)
				}
				if c := p.Spec.Containers[0]; c.Name != EtcdContainer || c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
					t.Errorf("container %s keeps termination message %q; without the agent, want its log tail on errors (for humans)", c.Name, c.TerminationMessagePolicy)
				}
				sc := p.Spec.Containers[0].SecurityContext
				if !ptr.Deref(sc.ReadOnlyRootFilesystem, false) || ptr.Deref(sc.AllowPrivilegeEscalation, true) || !ptr.Deref(p.Spec.SecurityContext.RunAsNonRoot, false) {
					t.Errorf("security context %+v / %+v", sc, p.Spec.SecurityContext)
				}
			},
		},
		"TLS by default: https URLs, client certificates required, the member's own Secret mounted whole": {
			cluster: testCluster(),
			check: func(t *testing.T, p *corev1.Pod) {
				args := p.Spec.Containers[0].Command
				for flag, v := range map[string]string{
					"--listen-client-urls": "https://0.0.0.0:2379", "--listen-peer-urls": "https://0.0.0.0:2380",
					"--listen-metrics-urls": "http://0.0.0.0:2381",
					"--cert-file":           "/etc/etcd/tls/tls.crt", "--key-file": "/etc/etcd/tls/tls.key", "--trusted-ca-file": "/etc/etcd/tls/ca.crt",
					"--peer-cert-file": "/etc/etcd/tls/tls.crt", "--peer-key-file": "/etc/etcd/tls/tls.key", "--peer-trusted-ca-file": "/etc/etcd/tls/ca.crt",
				} {
					if got, _ := arg(args, flag); got != v {
						t.Errorf("%s = %q, want %q", flag, got, v)
					}
				}
				for _, flag := range []string{"--client-cert-auth", "--peer-client-cert-auth"} {
					found := false
					for _, a := range args {
						found = found || a == flag
					}
					if !found {
						t.Errorf("%s missing", flag)
					}
				}
				var secret string
				for _, v := range p.Spec.Volumes {
					if v.Secret != nil {
						secret = v.Secret.SecretName
					}
				}
				if secret != MemberSecretName("db-abcde") {
					t.Errorf("TLS Secret volume %q, want db-abcde-tls", secret)
				}
				for _, m := range p.Spec.Containers[0].VolumeMounts {
					if m.SubPath != "" {
						t.Errorf("mount %s uses subPath %s: the kubelet would not update it in place", m.Name, m.SubPath)
					}
				}
				if p.Annotations[AnnotationTLS] != "Steward" {
					t.Errorf("annotation %s = %q, want Steward", AnnotationTLS, p.Annotations[AnnotationTLS])
				}
				if port := p.Spec.Containers[0].ReadinessProbe.HTTPGet.Port.IntValue(); port != MetricsPort && port != ProbePort {
					t.Errorf("probes must use a plain HTTP port (metrics or the agent's), not %d", port)
				}
			},
		},
		"provider None: plaintext as before": {
			cluster: testCluster(func(c *etcdv1alpha1.EtcdCluster) { c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: "None"} }),
			check: func(t *testing.T, p *corev1.Pod) {
				args := p.Spec.Containers[0].Command
				if got, _ := arg(args, "--advertise-client-urls"); got != "http://db-abcde.db-peer.prod.svc.cluster.local:2379" {
					t.Errorf("--advertise-client-urls = %q", got)
				}
				for _, a := range args {
					if !strings.HasPrefix(a, "--initial-cluster=") && (strings.Contains(a, "cert") || strings.Contains(a, "https")) {
						t.Errorf("plaintext member has TLS flag %s", a)
					}
				}
				if p.Annotations[AnnotationTLS] != "None" {
					t.Errorf("annotation %s = %q, want None", AnnotationTLS, p.Annotations[AnnotationTLS])
				}
				if len(p.Spec.Volumes) != 1 {
					t.Errorf("volumes %+v, want only data", p.Spec.Volumes)
				}
			},
		},
		"ephemeral storage uses a size-limited emptyDir": {
			cluster: testCluster(func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Storage.Ephemeral = true }),
			check: func(t *testing.T, p *corev1.Pod) {
				v := p.Spec.Volumes[0]
				if v.EmptyDir == nil || v.EmptyDir.SizeLimit.String() != "2Gi" || v.PersistentVolumeClaim != nil {
					t.Errorf("data volume %+v", v)
				}
			},
		},
		"custom image and tuning": {
			cluster: testCluster(func(c *etcdv1alpha1.EtcdCluster) {
				c.Spec.Image = "registry.example/etcd:custom"
				q := resource.MustParse("4Gi")
				c.Spec.Etcd = etcdv1alpha1.EtcdTuning{QuotaBackendBytes: &q, AutoCompactionMode: "periodic", AutoCompactionRetention: "1h",
					HeartbeatIntervalMillis: ptr.To[int32](200), ElectionTimeoutMillis: ptr.To[int32](2000), SnapshotCount: ptr.To[int64](5000),
					MaxRequestBytes: ptr.To(resource.MustParse("128Ki"))}
			}),
			check: func(t *testing.T, p *corev1.Pod) {
				if p.Spec.Containers[0].Image != "registry.example/etcd:custom" {
					t.Errorf("image %s", p.Spec.Containers[0].Image)
				}
				for flag, v := range map[string]string{"--quota-backend-bytes": "4294967296", "--auto-compaction-mode": "periodic",
					"--auto-compaction-retention": "1h", "--heartbeat-interval": "200", "--election-timeout": "2000", "--snapshot-count": "5000",
					"--max-request-bytes": "131072"} {
					if got, _ := arg(p.Spec.Containers[0].Command, flag); got != v {
						t.Errorf("%s = %q, want %q", flag, got, v)
					}
				}
			},
		},
		"unset tuning leaves etcd defaults, but the quota fits the volume": {
			cluster: testCluster(),
			check: func(t *testing.T, p *corev1.Pod) {
				if got, _ := arg(p.Spec.Containers[0].Command, "--quota-backend-bytes"); got != strconv.Itoa((2048-448)/2<<20) {
					t.Errorf("--quota-backend-bytes = %q on a 2Gi volume, want (2Gi - 448Mi) / 2", got)
				}
				for _, flag := range []string{"--heartbeat-interval", "--election-timeout", "--auto-compaction-mode", "--max-request-bytes"} {
					if _, ok := arg(p.Spec.Containers[0].Command, flag); ok {
						t.Errorf("%s set without a spec value", flag)
					}
				}
			},
		},
		"user pod metadata and scheduling, Steward's labels win": {
			cluster: testCluster(func(c *etcdv1alpha1.EtcdCluster) {
				c.Spec.Pod = etcdv1alpha1.PodTemplate{Labels: map[string]string{"team": "a", LabelCluster: "evil"},
					Annotations: map[string]string{"note": "x"}, NodeSelector: map[string]string{"disk": "ssd"},
					Tolerations: []corev1.Toleration{{Key: "etcd", Operator: corev1.TolerationOpExists}}, PriorityClassName: "high"}
			}),
			check: func(t *testing.T, p *corev1.Pod) {
				if p.Labels["team"] != "a" || p.Labels[LabelCluster] != "db" || p.Annotations["note"] != "x" {
					t.Errorf("metadata %v %v", p.Labels, p.Annotations)
				}
				if p.Spec.NodeSelector["disk"] != "ssd" || len(p.Spec.Tolerations) != 1 || p.Spec.PriorityClassName != "high" {
					t.Errorf("scheduling %+v", p.Spec)
				}
			},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) { tt.check(t, MemberPod(tt.cluster, boot, opts)) })
	}
}

func TestMemberPVC(t *testing.T) {
	c := testCluster(func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Storage.StorageClassName = ptr.To("fast") })
	pvc := MemberPVC(c, boot, opts)
	if pvc.Name != "db-abcde-data" || ptr.Deref(pvc.Spec.StorageClassName, "") != "fast" ||
		pvc.Spec.Resources.Requests.Storage().String() != "2Gi" || pvc.Annotations[AnnotationInitialCluster] == "" {
		t.Errorf("pvc %+v", pvc)
	}
	if pvc.Annotations[AnnotationVersion] != c.Spec.Version || pvc.Annotations[AnnotationImage] != Image(c, opts) {
		t.Errorf("pvc records release %q %q, want the spec's", pvc.Annotations[AnnotationVersion], pvc.Annotations[AnnotationImage])
	}
}

// TestMemberRelease: a member created on a release other than the spec's (a learner joining while a downgrade
// is pending, a Pod re-created on its volume) runs that release's image, and records it.
func TestMemberRelease(t *testing.T) {
	c := testCluster()
	old := boot
	old.Version = "3.5.35"
	pod, pvc := MemberPod(c, old, opts), MemberPVC(c, old, opts)
	want := opts.ImageRepository + ":v3.5.35"
	if pod.Spec.Containers[0].Image != want || pod.Annotations[AnnotationVersion] != "3.5.35" || pvc.Annotations[AnnotationImage] != want {
		t.Errorf("pod image %s, version %s, pvc image %s; want %s", pod.Spec.Containers[0].Image, pod.Annotations[AnnotationVersion], pvc.Annotations[AnnotationImage], want)
	}
	custom := testCluster(func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Image = "mirror.example/etcd:3.6" })
	if got := ImageFor(custom, custom.Spec.Version, opts); got != "mirror.example/etcd:3.6" {
		t.Errorf("custom image for the spec's version = %s", got)
	}
	if got := ImageFor(custom, "3.5.35", opts); got != want {
		t.Errorf("image for another version than the custom image's = %s, want the default %s", got, want)
	}
}

func TestServicesAndBudget(t *testing.T) {
	c := testCluster()
	peer := PeerService(c)
	if peer.Spec.ClusterIP != corev1.ClusterIPNone || !peer.Spec.PublishNotReadyAddresses || peer.Name != "db-peer" {
		t.Errorf("peer service %+v", peer.Spec)
	}
	client := ClientService(c)
	if client.Spec.ClusterIP != "" || client.Spec.PublishNotReadyAddresses || client.Name != "db" {
		t.Errorf("client service %+v", client.Spec)
	}
	for replicas, want := range map[int32]int{1: 1, 3: 2, 5: 3, 7: 4, 9: 5} {
		c.Spec.Replicas = replicas
		if got := PodDisruptionBudget(c).Spec.MinAvailable.IntValue(); got != want {
			t.Errorf("replicas %d: minAvailable %d, want %d (quorum)", replicas, got, want)
		}
	}
}

func TestInitialClusterRoundTrip(t *testing.T) {
	s := FormatInitialCluster(boot.InitialCluster)
	got, err := ParseInitialCluster(s)
	if err != nil || !reflect.DeepEqual(got, boot.InitialCluster) {
		t.Fatalf("ParseInitialCluster(%q) = %v, %v", s, got, err)
	}
	for _, bad := range []string{"", "a", "a=", "=u", "a=u,a=v", "a=u,,b=v"} {
		if _, err := ParseInitialCluster(bad); err == nil {
			t.Errorf("ParseInitialCluster(%q) accepted", bad)
		}
	}
}

func TestBackupJobIsNotAMember(t *testing.T) {
	b := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: strings.Repeat("b", 70)},
		Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: "db", Destination: etcdv1alpha1.BackupDestination{
			S3: &etcdv1alpha1.S3Destination{Endpoint: "s3:9000", Bucket: "bkt", Key: "k", CredentialsSecret: &etcdv1alpha1.SecretReference{Name: "creds"}}}}}
	for _, job := range []*batchv1.Job{BackupJob(b, []string{"m=https://m:2379"}, "agent", AgentAccess{ClientSecret: "db-client"}), DeleteJob(b, "agent")} {
		if _, ok := job.Spec.Template.Labels[LabelCluster]; ok {
			t.Errorf("Job %s Pods carry %s: the cluster controller would take them for members", job.Name, LabelCluster)
		}
		if len(job.Name) > 63 {
			t.Errorf("Job name %s longer than a label value may be", job.Name)
		}
		for _, e := range job.Spec.Template.Spec.Containers[0].Env {
			if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != "creds" {
				t.Errorf("credential %s not taken from the Secret by reference", e.Name)
			}
		}
	}
}

func TestBackupJobAccess(t *testing.T) {
	b := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"},
		Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: "db", Destination: etcdv1alpha1.BackupDestination{
			PVC: &etcdv1alpha1.PVCDestination{ClaimName: "c", Path: "p"}}}}
	cluster := func(provider string, auth bool, credentialsInStatus string) *etcdv1alpha1.EtcdCluster {
		c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"},
			Spec: etcdv1alpha1.EtcdClusterSpec{TLS: &etcdv1alpha1.TLSSpec{Provider: provider}, Auth: &etcdv1alpha1.AuthSpec{Enabled: auth}}}
		c.Status.OperatorCredentialsSecret = credentialsInStatus
		return c
	}
	tests := map[string]struct {
		cluster                  *etcdv1alpha1.EtcdCluster
		wantTLS, wantCredentials string
	}{
		"TLS cluster":                     {cluster("Steward", false, ""), "db-client", ""},
		"TLS cluster with auth":           {cluster("Steward", true, ""), "db-client", ""},
		"plaintext cluster":               {cluster("None", false, ""), "", ""},
		"plaintext cluster with auth":     {cluster("None", true, ""), "", "db-operator-credentials"},
		"switched to TLS after passwords": {cluster("Steward", true, "db-operator-credentials"), "db-client", "db-operator-credentials"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			job := BackupJob(b, []string{"m=https://m:2379"}, "agent", AgentAccessFor(tt.cluster))
			spec := job.Spec.Template.Spec
			var tlsSecret, credentials string
			for _, v := range spec.Volumes {
				switch {
				case v.Secret == nil:
				case v.Secret.Optional != nil && *v.Secret.Optional:
					credentials = v.Secret.SecretName
				default:
					tlsSecret = v.Secret.SecretName
				}
			}
			args := strings.Join(spec.Containers[0].Args, " ")
			hasTLSFlags := strings.Contains(args, "--cert-file=/etc/steward/etcd-tls/tls.crt") && strings.Contains(args, "--ca-file=") && strings.Contains(args, "--key-file=")
			hasCredentialsFlag := strings.Contains(args, "--credentials-dir="+AgentCredentialsMount)
			if tlsSecret != tt.wantTLS || hasTLSFlags != (tt.wantTLS != "") {
				t.Errorf("TLS Secret %q, flags %v (args %s); want Secret %q", tlsSecret, hasTLSFlags, args, tt.wantTLS)
			}
			if credentials != tt.wantCredentials || hasCredentialsFlag != (tt.wantCredentials != "") {
				t.Errorf("credentials Secret %q (optional), flag %v (args %s); want %q", credentials, hasCredentialsFlag, args, tt.wantCredentials)
			}
			if len(spec.Volumes) != len(spec.Containers[0].VolumeMounts) {
				t.Errorf("%d volumes, %d mounts", len(spec.Volumes), len(spec.Containers[0].VolumeMounts))
			}
		})
	}
}

func TestMemberDNSNames(t *testing.T) {
	names := strings.Join(MemberDNSNames(testCluster(), "db-abcde", opts), " ")
	for _, want := range []string{"db-abcde.db-peer.prod.svc.cluster.local", "db-abcde", "db.prod.svc.cluster.local", "db.prod.svc", "db.prod", "db", "localhost"} {
		if !strings.Contains(" "+names+" ", " "+want+" ") {
			t.Errorf("member certificate lacks %s: %s", want, names)
		}
	}
	extra := testCluster(func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderSteward, ExtraSANs: &etcdv1alpha1.ExtraSANs{
			DNSNames: []string{"etcd.example.com", "*.etcd.example.com"}, IPAddresses: []string{"192.0.2.10", "2001:db8::10", "not-an-ip"}}}
	})
	names = strings.Join(MemberDNSNames(extra, "db-abcde", opts), " ")
	if !strings.HasSuffix(names, " etcd.example.com *.etcd.example.com") || !strings.Contains(names, "db.prod.svc.cluster.local") {
		t.Errorf("member certificate names with extraSANs: %s", names)
	}
	var ips []string
	for _, ip := range MemberIPs(extra) {
		ips = append(ips, ip.String())
	}
	if got, want := strings.Join(ips, " "), "127.0.0.1 ::1 192.0.2.10 2001:db8::10"; got != want {
		t.Errorf("member certificate IPs %q, want %q (loopback, then the extra addresses that parse)", got, want)
	}
}

// TestQuotaBackendBytes: unset, the quota leaves the volume room for the WAL, snapshots and a second copy of the
// database; set, it is the user's (admission has checked that it fits).
func TestQuotaBackendBytes(t *testing.T) {
	const mi, gi = int64(1) << 20, int64(1) << 30
	tests := map[string]struct {
		size, quota string
		ephemeral   bool
		raised      int64
		max         string
		want        int64
	}{
		"a raise within the maximum stands":      {size: "10Gi", quota: "1Gi", raised: 2 * gi, max: "4Gi", want: 2 * gi},
		"a raise is capped at a lowered maximum": {size: "10Gi", quota: "1Gi", raised: 2 * gi, max: "1536Mi", want: 1536 * mi},
		"without a maximum no raise stands":      {size: "10Gi", quota: "1Gi", raised: 2 * gi, want: gi},
		"a spec quota above the raise wins":      {size: "10Gi", quota: "3Gi", raised: 2 * gi, max: "4Gi", want: 3 * gi},
		"the default 1Gi volume":                 {size: "1Gi", want: 288 * mi},
		"the smallest volume admission takes":    {size: "512Mi", want: 32 * mi},
		"a 2Gi volume":                           {size: "2Gi", want: 800 * mi},
		"a large volume: at most 8Gi":            {size: "100Gi", want: 8 * gi},
		"just below the cap":                     {size: "16832Mi", want: 8 * gi},
		"an emptyDir's size limit counts too":    {size: "1Gi", ephemeral: true, want: 288 * mi},
		"a volume admitted before the rule":      {size: "256Mi", want: 64 * mi},
		"the user's quota":                       {size: "10Gi", quota: "2Gi", want: 2 * gi},
		"the user's quota, in decimal units too": {size: "10Gi", quota: "1G", want: 1000 * 1000 * 1000},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := testCluster(func(c *etcdv1alpha1.EtcdCluster) {
				c.Spec.Storage = etcdv1alpha1.StorageSpec{Size: resource.MustParse(tt.size), Ephemeral: tt.ephemeral}
				if tt.quota != "" {
					q := resource.MustParse(tt.quota)
					c.Spec.Etcd.QuotaBackendBytes = &q
				}
				if tt.max != "" {
					m := resource.MustParse(tt.max)
					c.Spec.Maintenance = &etcdv1alpha1.Maintenance{RecoverFromNoSpace: &etcdv1alpha1.NoSpaceRecovery{MaxQuotaBackendBytes: &m}}
				}
				c.Status.RaisedQuotaBackendBytes = tt.raised
			})
			got := QuotaBackendBytes(c)
			if got != tt.want {
				t.Fatalf("quota %d (%dMi), want %d (%dMi)", got, got/mi, tt.want, tt.want/mi)
			}
			if tt.quota == "" && tt.size != "256Mi" && 2*got+volumeReserveBytes > c.Spec.Storage.Size.Value() {
				t.Fatalf("quota %d does not leave the volume its reserve", got)
			}
		})
	}
}

// agentMembers are members whose Pods get the agent differently from a bootstrap member of several (boot): the
// one member of a new cluster, a member joining a running cluster, and a bootstrap member restored from a backup.
func agentMembers() (single, joining, restored Member) {
	single = Member{Name: "db-abcde", State: "new", InitialCluster: map[string]string{"db-abcde": boot.InitialCluster["db-abcde"]}}
	joining = boot
	joining.State = "existing"
	restored = boot
	restored.Restore = &RestoreSource{Restore: "r1", Backup: &etcdv1alpha1.EtcdBackup{Spec: etcdv1alpha1.EtcdBackupSpec{
		Destination: etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "backups", Path: "db/1.db"}}}}}
	return single, joining, restored
}

func TestAwaitDNSContainer(t *testing.T) {
	withAgent := opts
	withAgent.AgentImage, withAgent.AgentCurrent = "steward.local/steward:dev", true
	olderAgent := withAgent
	olderAgent.AgentCurrent = false
	single, joining, restored := agentMembers()
	tests := map[string]struct {
		m    Member
		o    Options
		want []string // init container names
	}{
		"a bootstrap member of two waits for both names (and installs the agent)":                       {boot, withAgent, []string{AwaitDNSContainer}},
		"a one-member bootstrap has no peer to look up":                                                 {single, withAgent, []string{InstallContainer}},
		"a member joining a running cluster: its peers have records":                                    {joining, withAgent, []string{InstallContainer}},
		"no agent image: etcd starts as before":                                                         {boot, opts, nil},
		"a restored bootstrap member waits before its restore (after it the agent would find a member)": {restored, withAgent, []string{AwaitDNSContainer, InstallContainer, RestoreContainer}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			p := MemberPod(testCluster(), tt.m, tt.o)
			var got []string
			for _, c := range p.Spec.InitContainers {
				got = append(got, c.Name)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("init containers %v, want %v", got, tt.want)
			}
			i := slices.Index(got, AwaitDNSContainer)
			if i < 0 {
				return
			}
			c := p.Spec.InitContainers[i]
			want := []string{"/usr/local/bin/steward-agent", "await-dns", "--data-dir=/var/lib/etcd/data", "--timeout=1m",
				"--host=db-abcde.db-peer.prod.svc.cluster.local", "--host=db-fghjk.db-peer.prod.svc.cluster.local"}
			// Without a restore's init containers (which install the agent), the one container also installs it.
			installs := !slices.Contains(got, InstallContainer)
			if installs {
				want = append(want, "--install-to="+toolsMount+"/steward-agent")
			}
			if c.Image != withAgent.AgentImage || fmt.Sprint(c.Command) != fmt.Sprint(want) {
				t.Errorf("image %s command %v, want %v", c.Image, c.Command, want)
			}
			if len(c.VolumeMounts) != 1+map[bool]int{true: 1}[installs] || c.VolumeMounts[0].Name != dataVolume || !c.VolumeMounts[0].ReadOnly {
				t.Errorf("mounts %+v: the data volume, read-only", c.VolumeMounts)
			}
			if installs && (c.VolumeMounts[1].Name != toolsVolume || c.VolumeMounts[1].MountPath != toolsMount || c.VolumeMounts[1].ReadOnly) {
				t.Errorf("mounts %+v: the tools volume, writable, to install the agent into", c.VolumeMounts)
			}
			if !ptr.Deref(c.SecurityContext.ReadOnlyRootFilesystem, false) || c.Resources.Requests.Cpu().IsZero() {
				t.Errorf("security context %+v, resources %+v", c.SecurityContext, c.Resources)
			}
		})
	}
}

// TestInitialClusterState: etcd is told to bootstrap ("new") by every Pod of a bootstrap of several members
// (emptied, such a member finds that its peers know it has run and refuses to start), and by the first Pod of a
// one-member bootstrap, whose data dir starts empty. A one-member bootstrap's member whose data dir already holds
// it (restored from a snapshot, or re-created on its volume) starts "existing": emptied, it finds no peer and
// refuses to start, where "new" would start an empty cluster under the old identity. The recorded state stays the
// member's own: the planner tells bootstrap members by it.
func TestInitialClusterState(t *testing.T) {
	source := &RestoreSource{Restore: "r1", Backup: &etcdv1alpha1.EtcdBackup{Spec: etcdv1alpha1.EtcdBackupSpec{
		Destination: etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "backups", Path: "b.db"}}}}}
	alone := boot
	alone.InitialCluster = map[string]string{"db-abcde": boot.InitialCluster["db-abcde"]}
	with := func(m Member, change func(*Member)) Member {
		change(&m)
		return m
	}
	tests := map[string]struct {
		member    Member
		flag, rec string
		alone     bool
	}{
		"a bootstrap member's first Pod":                     {boot, "new", "new", false},
		"a bootstrap member restored":                        {with(boot, func(m *Member) { m.Restore = source }), "new", "new", false},
		"a bootstrap member re-created":                      {with(boot, func(m *Member) { m.HasRun = true }), "new", "new", false},
		"a member joining a running cluster":                 {with(boot, func(m *Member) { m.State = "existing" }), "existing", "existing", false},
		"a one-member bootstrap's first Pod":                 {alone, "new", "new", true},
		"a one-member bootstrap restored (a restore's seed)": {with(alone, func(m *Member) { m.Restore = source }), "existing", "new", false},
		"a one-member bootstrap re-created on its volume":    {with(alone, func(m *Member) { m.HasRun = true }), "existing", "new", false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			p := MemberPod(testCluster(), tt.member, opts)
			if got, _ := arg(p.Spec.Containers[0].Command, "--initial-cluster-state"); got != tt.flag {
				t.Errorf("--initial-cluster-state = %q, want %q", got, tt.flag)
			}
			if got := p.Annotations[AnnotationInitialClusterState]; got != tt.rec {
				t.Errorf("recorded state %q, want %q", got, tt.rec)
			}
			if got := PodBootstrapsAlone(p); got != tt.alone {
				t.Errorf("PodBootstrapsAlone = %v, want %v", got, tt.alone)
			}
		})
	}
}

// TestEtcdRunsGuarded: with an agent image (without one, etcd starts directly, TestMemberPod), etcd is started by
// steward-agent run-etcd (from the tools volume, installed by an init
// container, once), which refuses an emptied data dir once the member has run: marked on the tools volume, or
// told by --guard-has-run for a Pod re-created on a member's volume. etcd's own flags follow "--" unchanged.
func TestEtcdRunsGuarded(t *testing.T) {
	restored := boot
	restored.Restore = &RestoreSource{Restore: "r1", Backup: &etcdv1alpha1.EtcdBackup{Spec: etcdv1alpha1.EtcdBackupSpec{
		Destination: etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "backups", Path: "b.db"}}}}}
	recreated := boot
	recreated.HasRun = true
	for name, tt := range map[string]struct {
		member Member
		hasRun bool
	}{"a new member": {boot, false}, "a restored member": {restored, false}, "a Pod re-created on a member that has run": {recreated, true}} {
		t.Run(name, func(t *testing.T) {
			withAgent := opts
			withAgent.AgentImage, withAgent.AgentCurrent = "steward.local/steward-agent:v1", true
			p := MemberPod(testCluster(), tt.member, withAgent)
			cmd := p.Spec.Containers[0].Command
			if cmd[0] != toolsMount+"/steward-agent" || cmd[1] != "run-etcd" {
				t.Fatalf("command %v, want steward-agent run-etcd", cmd)
			}
			if got, _ := arg(cmd, "--guard-data-dir"); got != "/var/lib/etcd/data" {
				t.Errorf("--guard-data-dir = %q", got)
			}
			if got, _ := arg(cmd, "--guard-mark"); got != EtcdMark {
				t.Errorf("--guard-mark = %q, want %q", got, EtcdMark)
			}
			if has := slices.Contains(cmd, "--guard-has-run"); has != tt.hasRun {
				t.Errorf("--guard-has-run %v, want %v", has, tt.hasRun)
			}
			// The agent's exit report is the termination message, and nothing else can be: etcd's log holds
			// clients' keys (plan.DataLossEvidence).
			c := p.Spec.Containers[0]
			if got, _ := arg(cmd, "--exit-report"); got != c.TerminationMessagePath || c.TerminationMessagePolicy != corev1.TerminationMessageReadFile {
				t.Errorf("--exit-report = %q, termination message from %q (%s), want the file the agent writes, only", got, c.TerminationMessagePath, c.TerminationMessagePolicy)
			}
			i := slices.Index(cmd, "--")
			if i < 0 || cmd[i+1] != "/usr/local/bin/etcd" {
				t.Fatalf("command %v: etcd does not follow --", cmd)
			}
			if got, _ := arg(cmd[i+1:], "--name"); got != "db-abcde" {
				t.Errorf("etcd --name = %q", got)
			}
			installs := 0
			for _, c := range p.Spec.InitContainers {
				if c.Name == InstallContainer || slices.Contains(c.Command, "--install-to="+toolsMount+"/steward-agent") {
					installs++
				}
			}
			if installs != 1 {
				t.Errorf("%d init containers install the agent, want 1", installs)
			}
			mounted := false
			for _, vm := range p.Spec.Containers[0].VolumeMounts {
				mounted = mounted || (vm.Name == toolsVolume && vm.MountPath == toolsMount && !vm.ReadOnly)
			}
			if !mounted {
				t.Errorf("etcd container does not mount the tools volume read-write: %+v", p.Spec.Containers[0].VolumeMounts)
			}
		})
	}
	older := opts
	older.AgentImage, older.AgentCurrent = "steward.local/steward-agent:v0.0.1", false
	p := MemberPod(testCluster(), boot, older)
	if c := p.Spec.Containers[0]; c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		t.Errorf("without the agent, termination message %q, want the log tail for humans", c.TerminationMessagePolicy)
	}
	if cmd := p.Spec.Containers[0].Command; cmd[0] != "/usr/local/bin/etcd" {
		t.Errorf("with an agent of an older release (no run-etcd) etcd must start directly, command %v", cmd)
	}
	if len(p.Spec.InitContainers) != 0 {
		t.Errorf("init containers %v with an older agent, want none", p.Spec.InitContainers)
	}
}

// TestBootstrapAfter: a member of a new cluster of several starts after the members ranked (by name) before it
// serve; the first, a member joining a running cluster, a one-member cluster's and a restored
// member (its data dir holds it, so etcd asks no peer) do not wait.
func TestBootstrapAfter(t *testing.T) {
	withAgent := opts
	withAgent.AgentImage, withAgent.AgentCurrent = "steward.local/steward:dev", true
	second := boot
	second.Name = "db-fghjk"
	joining := second
	joining.State = "existing"
	single := Member{Name: "db-fghjk", State: "new", InitialCluster: map[string]string{"db-fghjk": boot.InitialCluster["db-fghjk"]}}
	restored := second
	restored.Restore = &RestoreSource{Restore: "r1", Backup: &etcdv1alpha1.EtcdBackup{Spec: etcdv1alpha1.EtcdBackupSpec{
		Destination: etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "backups", Path: "db/1.db"}}}}}
	for name, tt := range map[string]struct {
		m    Member
		want string // the flag's value, "" for none
	}{
		"the first of the bootstrap":         {boot, ""},
		"the second waits for the first":     {second, boot.InitialCluster["db-abcde"]},
		"a member joining a running cluster": {joining, ""},
		"a one-member cluster":               {single, ""},
		"a restored member":                  {restored, ""},
	} {
		t.Run(name, func(t *testing.T) {
			got, ok := arg(MemberPod(testCluster(), tt.m, withAgent).Spec.Containers[0].Command, "--bootstrap-after")
			if got != tt.want || ok != (tt.want != "") {
				t.Errorf("--bootstrap-after=%q (given: %v), want %q", got, ok, tt.want)
			}
		})
	}
}

// TestAgentFromImageVolume: with AgentImageVolume, a member Pod mounts the agent image read-only and etcd's
// container runs run-etcd from it, with no init container installing it (a bootstrap member of several still
// waits for DNS, without --install-to); the tools volume stays, writable, for run-etcd's mark. A restored member
// installs the agent as before (its restore container runs it from the tools volume), and an agent of an older
// release (no run-etcd) gets no image volume: etcd starts directly.
func TestAgentFromImageVolume(t *testing.T) {
	withVolume := opts
	withVolume.AgentImage, withVolume.AgentCurrent, withVolume.AgentImageVolume = "steward.local/steward:dev", true, true
	older := withVolume
	older.AgentCurrent = false
	single, joining, restored := agentMembers()
	for name, tt := range map[string]struct {
		m      Member
		o      Options
		volume bool     // the agent runs from the image volume
		inits  []string // init container names
	}{
		"a one-member bootstrap: no init container":            {single, withVolume, true, nil},
		"a member joining a running cluster":                   {joining, withVolume, true, nil},
		"a bootstrap member of two waits for DNS only":         {boot, withVolume, true, []string{AwaitDNSContainer}},
		"a restored member installs the agent for its restore": {restored, withVolume, false, []string{AwaitDNSContainer, InstallContainer, RestoreContainer}},
		"an older agent: etcd starts directly":                 {single, older, false, nil},
	} {
		t.Run(name, func(t *testing.T) {
			p := MemberPod(testCluster(), tt.m, tt.o)
			var inits []string
			for _, c := range p.Spec.InitContainers {
				inits = append(inits, c.Name)
				if slices.Contains(c.Command, "--install-to="+toolsMount+"/steward-agent") && tt.volume {
					t.Errorf("init container %s installs the agent the image volume brings", c.Name)
				}
			}
			if fmt.Sprint(inits) != fmt.Sprint(tt.inits) {
				t.Errorf("init containers %v, want %v", inits, tt.inits)
			}
			var image *corev1.ImageVolumeSource
			for _, v := range p.Spec.Volumes {
				if v.Name == agentImageVolumeName {
					image = v.Image
				}
			}
			etcd := p.Spec.Containers[0]
			mounted := map[string]corev1.VolumeMount{}
			for _, vm := range etcd.VolumeMounts {
				mounted[vm.Name] = vm
			}
			if !tt.volume {
				if image != nil || mounted[agentImageVolumeName].Name != "" || etcd.Command[0] == agentImageMount+agentImagePath {
					t.Errorf("agent image volume %+v, mounts %+v, command %v: want the agent from the tools volume or none", image, etcd.VolumeMounts, etcd.Command)
				}
				return
			}
			if image == nil || image.Reference != withVolume.AgentImage || image.PullPolicy != corev1.PullIfNotPresent {
				t.Fatalf("agent image volume %+v, want %s, pulled if not present", image, withVolume.AgentImage)
			}
			if vm := mounted[agentImageVolumeName]; vm.MountPath != agentImageMount || !vm.ReadOnly {
				t.Errorf("agent image mounted %+v, want read-only at %s", vm, agentImageMount)
			}
			if vm := mounted[toolsVolume]; vm.MountPath != toolsMount || vm.ReadOnly {
				t.Errorf("tools volume mounted %+v, want writable at %s for run-etcd's mark", vm, toolsMount)
			}
			if etcd.Command[0] != agentImageMount+agentImagePath || etcd.Command[1] != "run-etcd" {
				t.Errorf("command %v, want %s run-etcd", etcd.Command, agentImageMount+agentImagePath)
			}
			if got, _ := arg(etcd.Command, "--guard-mark"); got != EtcdMark {
				t.Errorf("--guard-mark = %q, want %q on the tools volume", got, EtcdMark)
			}
		})
	}
}

// TestBackupStorageFlags: every agent that writes or reads a backup gets its compression and the key Secret it
// needs, mounted read-only with only the key age.key: the backup Job writes with the backup's key, the verify
// Job and a restoring member only read with it, a point-in-time Job writes with its own and reads with the
// schedule's, and the follower writes segments with the schedule's.
func TestBackupStorageFlags(t *testing.T) {
	enc := func(name string) *etcdv1alpha1.BackupEncryption {
		return &etcdv1alpha1.BackupEncryption{KeySecret: etcdv1alpha1.SecretReference{Name: name}}
	}
	b := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"},
		Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: "db", Destination: etcdv1alpha1.BackupDestination{
			PVC: &etcdv1alpha1.PVCDestination{ClaimName: "c", Path: "p"}}, Compression: etcdv1alpha1.CompressionNone, Encryption: enc("bk")}}
	plain := b.DeepCopy()
	plain.Spec.Compression, plain.Spec.Encryption = "", nil
	s := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"},
		Spec: etcdv1alpha1.EtcdBackupScheduleSpec{ClusterName: "db", Destination: b.Spec.Destination, Encryption: enc("sk")}}
	pit := b.DeepCopy()
	pit.Spec.PointInTime = &etcdv1alpha1.PointInTimeSource{ScheduleName: "s"}
	pitJob, err := PointInTimeJob(pit, s, nil, "abc", "etcd", "agent")
	if err != nil {
		t.Fatal(err)
	}
	rs := &etcdv1alpha1.EtcdRestore{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r"}}
	follower := FollowerDeployment(s, testCluster(), AgentAccess{}, opts)
	tests := map[string]struct {
		spec            corev1.PodSpec
		args            []string
		want            string
		secrets, absent []string
	}{
		"backup Job": {spec: BackupJob(b, nil, "agent", AgentAccess{}).Spec.Template.Spec, want: "--compression=None --encryption-key-file=/etc/steward/encryption-key/age.key", secrets: []string{"bk"}, absent: []string{"--decryption-key-file"}},
		"backup Job, defaults": {spec: BackupJob(plain, nil, "agent", AgentAccess{}).Spec.Template.Spec, want: "--compression=Zstd",
			absent: []string{"--encryption-key-file", "--decryption-key-file"}},
		"verify Job":        {spec: VerifyJob(rs, b, "agent").Spec.Template.Spec, want: "--decryption-key-file=/etc/steward/decryption-key/age.key", secrets: []string{"bk"}, absent: []string{"--encryption-key-file"}},
		"point-in-time Job": {spec: pitJob.Spec.Template.Spec, want: "--encryption-key-file=/etc/steward/encryption-key/age.key --decryption-key-file=/etc/steward/decryption-key/age.key", secrets: []string{"bk", "sk"}},
		"follower":          {spec: follower.Spec.Template.Spec, want: "--compression=Zstd --encryption-key-file=/etc/steward/encryption-key/age.key", secrets: []string{"sk"}, absent: []string{"--decryption-key-file"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := tt.spec.Containers[0]
			args := strings.Join(append(c.Command, c.Args...), " ")
			if !strings.Contains(args, tt.want) {
				t.Errorf("args %s, want %s", args, tt.want)
			}
			for _, a := range tt.absent {
				if strings.Contains(args, a) {
					t.Errorf("args %s hold %s", args, a)
				}
			}
			var secrets []string
			for _, v := range tt.spec.Volumes {
				if v.Secret == nil || !strings.Contains(v.Name, "cryption-key") {
					continue
				}
				secrets = append(secrets, v.Secret.SecretName)
				if len(v.Secret.Items) != 1 || v.Secret.Items[0].Key != etcdv1alpha1.EncryptionKeySecretKey {
					t.Errorf("volume %s projects %v, want only %s", v.Name, v.Secret.Items, etcdv1alpha1.EncryptionKeySecretKey)
				}
			}
			for _, m := range c.VolumeMounts {
				if strings.Contains(m.Name, "cryption-key") && !m.ReadOnly {
					t.Errorf("mount %s is writable", m.Name)
				}
			}
			if strings.Join(secrets, ",") != strings.Join(tt.secrets, ",") {
				t.Errorf("key Secrets %v, want %v", secrets, tt.secrets)
			}
		})
	}
}

// TestPointInTimeJobDeadline: a point-in-time Job's deadline grows with the changes it may replay, from the oldest
// candidate snapshot (the agent falls back to older ones) to the target revision, or for a time target to the
// newest stored revision; the backup Jobs' 30 minutes when neither end is known; never more than two days, and
// never negative, whatever the revisions say.
func TestPointInTimeJobDeadline(t *testing.T) {
	sched := func(to int64) *etcdv1alpha1.EtcdBackupSchedule {
		s := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"},
			Spec: etcdv1alpha1.EtcdBackupScheduleSpec{ClusterName: "db", Destination: etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "c", Path: "p"}}}}
		if to > 0 {
			s.Status.Continuous = &etcdv1alpha1.ContinuousBackupStatus{RecoverableTo: &etcdv1alpha1.RecoveryPoint{Revision: to}}
		}
		return s
	}
	cands := []pitr.Candidate{{Name: "new", Revision: 9_000_000}, {Name: "old", Revision: 1_000_000}}
	for _, tc := range []struct {
		name       string
		candidates []pitr.Candidate
		revision   int64
		schedule   *etcdv1alpha1.EtcdBackupSchedule
		want       int64
	}{
		{"revision target, from the oldest candidate", cands, 11_000_000, sched(0), BackupJobDeadline + 10_000},
		{"time target, to the newest stored revision", cands, 0, sched(2_000_000), BackupJobDeadline + 1_000},
		{"a revision target wins over the stored end", cands, 1_500_000, sched(50_000_000), BackupJobDeadline + 500},
		{"no end known", cands, 0, sched(0), BackupJobDeadline},
		{"no candidate", nil, 11_000_000, sched(0), BackupJobDeadline},
		{"a target before every candidate", cands, 500, sched(0), BackupJobDeadline},
		{"a day of 1,000 writes a second", []pitr.Candidate{{Revision: 1}}, 86_400_001, sched(0), BackupJobDeadline + 86_400},
		{"capped", []pitr.Candidate{{Revision: 1}}, 1 << 62, sched(0), 48 * 60 * 60},
	} {
		b := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"},
			Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: "db", Destination: etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "c", Path: "p"}},
				PointInTime: &etcdv1alpha1.PointInTimeSource{ScheduleName: "s", Revision: tc.revision}}}
		job, err := PointInTimeJob(b, tc.schedule, tc.candidates, "abc", "etcd", "agent")
		if err != nil {
			t.Fatal(err)
		}
		if got := job.Spec.ActiveDeadlineSeconds; got == nil || *got != tc.want {
			t.Errorf("%s: deadline %v s, want %d s", tc.name, got, tc.want)
		}
		timeout := "--timeout=" + (time.Duration(tc.want) * time.Second).String()
		if args := job.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, timeout) {
			t.Errorf("%s: agent arguments %v, want %s (the agent's own deadline)", tc.name, args, timeout)
		}
	}
}
