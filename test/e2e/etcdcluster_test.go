package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/internal/testbed"
	"steward.dev/steward/test/e2e/framework"
)

func TestOneMemberCluster(t *testing.T) {
	parallel(t)
	ns := framework.NewNamespace(t, "one")
	framework.StartOperator(t, ns)
	c := framework.NewCluster(ns, "solo", 1)
	if err := framework.K8s.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	got := framework.WaitAvailable(t, client.ObjectKeyFromObject(c), 3*time.Minute)
	framework.CheckStatusMatchesEtcd(t, got)
	framework.WriteAndReadThroughService(t, got)
	framework.DeleteAndCheckNothingLeft(t, got)
}

func TestThreeMemberCluster(t *testing.T) {
	parallel(t)
	ns := framework.NewNamespace(t, "three")
	framework.StartOperator(t, ns)
	c := framework.NewCluster(ns, "trio", 3)
	if err := framework.K8s.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	got := framework.WaitAvailable(t, client.ObjectKeyFromObject(c), 4*time.Minute)
	framework.CheckStatusMatchesEtcd(t, got)
	framework.WriteAndReadThroughService(t, got)
	framework.CheckQuota(t, got, (1024-448)/2<<20) // derived from the 1Gi volume: room for the WAL and a second database
	var pdb policyv1.PodDisruptionBudget
	if err := framework.K8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "trio"}, &pdb); err != nil {
		t.Fatal(err)
	}
	if pdb.Spec.MinAvailable.IntValue() != 2 {
		t.Errorf("PodDisruptionBudget minAvailable %s, want 2 (quorum of 3)", pdb.Spec.MinAvailable.String())
	}
	// Available comes with quorum; Progressing and Degraded settle once every member's Pod is Ready too.
	framework.Poll(t, "Progressing and Degraded False", time.Minute, func() error {
		if err := framework.K8s.Get(context.Background(), client.ObjectKeyFromObject(c), got); err != nil {
			return err
		}
		for _, cond := range []string{etcdv1alpha1.ConditionProgressing, etcdv1alpha1.ConditionDegraded} {
			if c := meta.FindStatusCondition(got.Status.Conditions, cond); c == nil || c.Status != metav1.ConditionFalse {
				return fmt.Errorf("%s = %+v, want False", cond, c)
			}
		}
		return nil
	})

	framework.CheckDefaultPlacement(t, got)

	// A member Pod deleted with its volume intact comes back under the same name, with its data, while clients
	// keep reading and writing through the client Service: no acknowledged write lost, history linearizable.
	victim := got.Status.Members[0]
	ctx := context.Background()
	load := framework.StartLoad(t, got)
	var pod corev1.Pod
	if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: victim.Name}, &pod); err != nil {
		t.Fatal(err)
	}
	if err := framework.K8s.Delete(ctx, &pod); err != nil {
		t.Fatal(err)
	}
	framework.Poll(t, "member "+victim.Name+" re-created", 2*time.Minute, func() error {
		var again corev1.Pod
		if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(&pod), &again); err != nil {
			return err
		}
		if again.UID == pod.UID {
			return fmt.Errorf("still the old Pod")
		}
		return nil
	})
	got = framework.WaitAvailable(t, client.ObjectKeyFromObject(c), 3*time.Minute)
	framework.RequireNoLostWrites(t, load, "member Pod re-creation")
	framework.CheckStatusMatchesEtcd(t, got)
	for _, m := range got.Status.Members {
		if m.Name == victim.Name && m.ID != victim.ID {
			t.Errorf("member %s came back with ID %s, was %s", m.Name, m.ID, victim.ID)
		}
	}
	framework.ReadKeysFromMember(t, got, victim.Name)
	framework.DeleteAndCheckNothingLeft(t, got)
}

// TestBootstrapResumesAfterOperatorCrash recreates the states an operator leaves when it dies in the middle of a
// bootstrap — every PVC created and none, one or two of the Pods — and checks that the next operator finishes
// that bootstrap with the same members and one cluster identity. A last case stops the real operator as soon as
// the first member Pod exists and starts a new one.
func TestBootstrapResumesAfterOperatorCrash(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "crash")
	for podsBeforeCrash := 0; podsBeforeCrash <= 2; podsBeforeCrash++ {
		t.Run(fmt.Sprintf("crash after %d of 3 Pods", podsBeforeCrash), func(t *testing.T) {
			name := fmt.Sprintf("phoenix%d", podsBeforeCrash)
			c := framework.NewCluster(ns, name, 3)
			if err := framework.K8s.Create(ctx, c); err != nil {
				t.Fatal(err)
			}
			names := []string{name + "-bbbbb", name + "-ccccc", name + "-ddddd"}
			initial := map[string]string{}
			for _, n := range names {
				initial[n] = resources.PeerURL(c, n, framework.OperatorOptions)
			}
			for _, n := range names {
				m := resources.Member{Name: n, InitialCluster: initial, State: "new"}
				if err := framework.K8s.Create(ctx, resources.MemberPVC(c, m, framework.OperatorOptions)); err != nil {
					t.Fatal(err)
				}
			}
			// The Pods as Steward creates a new TLS cluster's (spec.tls.peerAuth MemberIdentity): checking the peer
			// identity from their first start. Pods without the check would be restarted into it once the cluster is
			// Available, racing the checks below.
			for _, n := range names[:podsBeforeCrash] {
				if err := framework.K8s.Create(ctx, resources.MemberPod(c, resources.Member{Name: n, InitialCluster: initial, State: "new", PeerCheck: true}, framework.OperatorOptions)); err != nil {
					t.Fatal(err)
				}
			}
			stop := framework.StartOperator(t, ns)
			got := framework.WaitAvailable(t, client.ObjectKeyFromObject(c), 4*time.Minute)
			stop()
			if members := framework.MemberNames(got); fmt.Sprint(members) != fmt.Sprint(names) {
				t.Fatalf("members after resumed bootstrap %v, want the interrupted bootstrap's %v", members, names)
			}
			framework.CheckStatusMatchesEtcd(t, got)
			framework.DeleteAndCheckNothingLeft(t, got)
		})
	}

	t.Run("operator stopped when the first Pod appears", func(t *testing.T) {
		c := framework.NewCluster(ns, "phoenix-real", 3)
		stop := framework.StartOperator(t, ns)
		if err := framework.K8s.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		framework.Poll(t, "first member Pod", time.Minute, func() error {
			var pods corev1.PodList
			if err := framework.K8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{resources.LabelCluster: c.Name}); err != nil {
				return err
			}
			if len(pods.Items) == 0 {
				return fmt.Errorf("no Pod yet")
			}
			return nil
		})
		stop()
		var pvcs corev1.PersistentVolumeClaimList
		if err := framework.K8s.List(ctx, &pvcs, client.InNamespace(ns), client.MatchingLabels{resources.LabelCluster: c.Name}); err != nil {
			t.Fatal(err)
		}
		before := map[string]bool{}
		for _, p := range pvcs.Items {
			before[p.Labels[resources.LabelMember]] = true
		}
		framework.StartOperator(t, ns)
		got := framework.WaitAvailable(t, client.ObjectKeyFromObject(c), 4*time.Minute)
		for _, n := range framework.MemberNames(got) {
			if !before[n] {
				t.Errorf("member %s was not part of the bootstrap the first operator started (%v)", n, before)
			}
		}
		framework.CheckStatusMatchesEtcd(t, got)
		framework.DeleteAndCheckNothingLeft(t, got)
	})
}

func TestBadSpecsAreRefusedAtAdmission(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "bad")
	tests := map[string]struct {
		mutate func(*etcdv1alpha1.EtcdCluster)
		want   string
	}{
		"even replicas":     {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = 2 }, "replicas must be odd"},
		"negative replicas": {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = -1 }, "should be greater than or equal to 1"},
		"too many replicas": {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = 11 }, "should be less than or equal to 9"},
		"unknown version":   {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Version = "3.9.1" }, "version must be an etcd release Steward supports"},
		"old version":       {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Version = "3.4.30" }, "version must be an etcd release Steward supports"},
		"not a version":     {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Version = "latest" }, "version must be an etcd release Steward supports"},
		"pre-release":       {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Version = "3.7.0-rc.0" }, "version must be an etcd release Steward supports"},
		"zero size":         {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Storage.Size = resource.MustParse("0") }, "size must be greater than zero"},
		"a maintenance window of 10 seconds": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Maintenance = &etcdv1alpha1.Maintenance{Window: &etcdv1alpha1.MaintenanceWindow{Schedule: "@daily", Duration: metav1.Duration{Duration: 10 * time.Second}}}
		}, "maintenance.window.duration must be between 1m and 168h"},
		"a node port on a ClusterIP Service": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Service = &etcdv1alpha1.ClientServiceTemplate{Type: corev1.ServiceTypeClusterIP, NodePort: ptr.To[int32](31000)}
		}, "service.nodePort needs service.type NodePort or LoadBalancer"},
		"source ranges on a NodePort Service": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Service = &etcdv1alpha1.ClientServiceTemplate{Type: corev1.ServiceTypeNodePort, LoadBalancerSourceRanges: []string{"10.0.0.0/8"}}
		}, "need service.type LoadBalancer"},
		"a source range that is no CIDR": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Service = &etcdv1alpha1.ClientServiceTemplate{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerSourceRanges: []string{"10.0.0.1"}}
		}, "service.loadBalancerSourceRanges must be CIDRs"},
		"a Steward annotation on the Service": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Service = &etcdv1alpha1.ClientServiceTemplate{Annotations: map[string]string{"etcd.steward.dev/service-template": "x"}}
		}, "service annotations under etcd.steward.dev/ are Steward's own"},
		"an extra SAN that is no IP address": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: "Steward", ExtraSANs: &etcdv1alpha1.ExtraSANs{IPAddresses: []string{"etcd.example.com"}}}
		}, "tls.extraSANs.ipAddresses must be IP addresses"},
		"an extra SAN that is no DNS name": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: "Steward", ExtraSANs: &etcdv1alpha1.ExtraSANs{DNSNames: []string{"https://etcd.example.com"}}}
		}, "spec.tls.extraSANs.dnsNames[0]: Invalid value"},
		"hibernating an ephemeral cluster": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Storage.Ephemeral, c.Spec.Hibernation = true, &etcdv1alpha1.Hibernation{Enabled: true}
		}, "an ephemeral cluster (storage.ephemeral) keeps its data in emptyDirs"},
		"TLS Secrets without names": {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: "Secrets"} },
			"tls.secrets (memberSecretName and clientSecretName) is required when tls.provider is Secrets"},
		"TLS CertManager without issuer": {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: "CertManager"} },
			"tls.certManager (issuerRef) is required when tls.provider is CertManager"},
		"TLS secrets with provider Steward": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: "Steward", Secrets: &etcdv1alpha1.TLSSecrets{MemberSecretName: "m", ClientSecretName: "c"}}
		}, "is required when tls.provider is Secrets, and refused with another TLS provider"},
		"TLS certManager with provider Secrets": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: "Secrets", Secrets: &etcdv1alpha1.TLSSecrets{MemberSecretName: "m", ClientSecretName: "c"},
				CertManager: &etcdv1alpha1.TLSCertManager{IssuerRef: etcdv1alpha1.IssuerRef{Name: "ca"}}}
		}, "is required when tls.provider is CertManager, and refused with another TLS provider"},
		"TLS member Secret not a name": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: "Secrets", Secrets: &etcdv1alpha1.TLSSecrets{MemberSecretName: "../Certs", ClientSecretName: "c"}}
		}, "memberSecretName"},
		"TLS issuer kind": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: "CertManager", CertManager: &etcdv1alpha1.TLSCertManager{IssuerRef: etcdv1alpha1.IssuerRef{Name: "ca", Kind: "Vault"}}}
		}, "Unsupported value"},
		"certificate lifetime too short": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: "Steward", CertificateLifetime: &metav1.Duration{Duration: time.Minute}}
		}, "certificateLifetime must be between 1h and 87600h"},
		"quorum-loss recovery too eager": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.QuorumLossRecovery = &etcdv1alpha1.QuorumLossRecovery{Policy: etcdv1alpha1.QuorumLossRestoreLatestBackup, After: &metav1.Duration{Duration: 10 * time.Second}}
		}, "after must be at least 30s"},
		"unknown quorum-loss policy": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.QuorumLossRecovery = &etcdv1alpha1.QuorumLossRecovery{Policy: "Always"}
		}, "Unsupported value"},
		"election too short": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Etcd.HeartbeatIntervalMillis, c.Spec.Etcd.ElectionTimeoutMillis = ptr.To[int32](100), ptr.To[int32](200)
		}, "at least 5 times"},
		"bad compaction mode": {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Etcd.AutoCompactionMode = "sometimes" }, "Unsupported value"},
		"a maximum quota the volume cannot hold": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Maintenance = &etcdv1alpha1.Maintenance{RecoverFromNoSpace: &etcdv1alpha1.NoSpaceRecovery{MaxQuotaBackendBytes: ptr.To(resource.MustParse("512Mi"))}}
		}, "maxQuotaBackendBytes does not fit storage.size"},
		"a maximum quota below the quota": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Etcd.QuotaBackendBytes = ptr.To(resource.MustParse("200Mi"))
			c.Spec.Maintenance = &etcdv1alpha1.Maintenance{RecoverFromNoSpace: &etcdv1alpha1.NoSpaceRecovery{MaxQuotaBackendBytes: ptr.To(resource.MustParse("100Mi"))}}
		}, "maxQuotaBackendBytes is below etcd.quotaBackendBytes"},
		"a hash check too often": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Maintenance = &etcdv1alpha1.Maintenance{CorruptionCheck: &etcdv1alpha1.CorruptionCheck{Interval: &metav1.Duration{Duration: 5 * time.Second}}}
		}, "interval must be 0s (off) or at least 10s"},
		"a defragmentation threshold out of range": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Maintenance = &etcdv1alpha1.Maintenance{Defragmentation: &etcdv1alpha1.Defragmentation{MinFreePercent: ptr.To[int32](100)}}
		}, "should be less than or equal to 99"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := framework.NewCluster(ns, "refused", 3)
			tt.mutate(c)
			err := framework.K8s.Create(ctx, c)
			if err == nil {
				_ = framework.K8s.Delete(ctx, c)
				t.Fatalf("accepted")
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q, want Invalid containing %q", err, tt.want)
			}
		})
	}

	t.Run("zero replicas", func(t *testing.T) {
		// The typed client drops a zero (omitempty); kubectl and YAML send it.
		err := framework.CreateUnstructured(ctx, map[string]any{
			"apiVersion": "etcd.steward.dev/v1alpha1", "kind": "EtcdCluster",
			"metadata": map[string]any{"name": "zero", "namespace": ns},
			"spec":     map[string]any{"replicas": 0, "version": "3.6.16"},
		})
		if err == nil || !strings.Contains(err.Error(), "should be greater than or equal to 1") {
			t.Fatalf("error %v, want a refusal of replicas 0", err)
		}
	})

	t.Run("malformed quantity", func(t *testing.T) {
		u := map[string]any{
			"apiVersion": "etcd.steward.dev/v1alpha1", "kind": "EtcdCluster",
			"metadata": map[string]any{"name": "badsize", "namespace": ns},
			"spec":     map[string]any{"replicas": 1, "version": "3.6.16", "storage": map[string]any{"size": "12XB"}},
		}
		err := framework.CreateUnstructured(ctx, u)
		if err == nil || !strings.Contains(err.Error(), "size") {
			t.Fatalf("error %v, want a refusal naming size", err)
		}
	})

	// Immutable fields: accepted at creation, refused on change. No operator runs, so nothing else changes.
	c := framework.NewCluster(ns, "fixed", 1)
	c.Spec.Storage.StorageClassName = ptr.To(testbed.StorageClassName)
	if err := framework.K8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = framework.K8s.Delete(ctx, c) }()
	for name, tt := range map[string]struct {
		mutate func(*etcdv1alpha1.EtcdCluster)
		want   string
	}{
		"ephemeral": {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Storage.Ephemeral = true }, "ephemeral is immutable"},
		"TLS provider to another TLS provider": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: "Secrets", Secrets: &etcdv1alpha1.TLSSecrets{MemberSecretName: "m", ClientSecretName: "c"}}
		}, "not from one TLS provider to another"},
	} {
		t.Run("change "+name, func(t *testing.T) {
			var cur etcdv1alpha1.EtcdCluster
			if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(c), &cur); err != nil {
				t.Fatal(err)
			}
			tt.mutate(&cur)
			err := framework.K8s.Update(ctx, &cur)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}

// TestTLSProviderFieldsAreImmutable: the member Secret of provider Secrets and the issuer of provider CertManager
// cannot change (running members mount the one and trust the other's CA); the client Secret can. No operator
// runs, so nothing else changes.
func TestTLSProviderFieldsAreImmutable(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "bad")
	byo := framework.NewCluster(ns, "byo", 1)
	byo.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: "Secrets", Secrets: &etcdv1alpha1.TLSSecrets{MemberSecretName: "m", ClientSecretName: "c"}}
	cm := framework.NewCluster(ns, "cm", 1)
	cm.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: "CertManager", CertManager: &etcdv1alpha1.TLSCertManager{IssuerRef: etcdv1alpha1.IssuerRef{Name: "ca"}}}
	for _, c := range []*etcdv1alpha1.EtcdCluster{byo, cm} {
		if err := framework.K8s.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = framework.K8s.Delete(ctx, c) })
	}
	if cm.Spec.TLS.CertManager.IssuerRef.Kind != "Issuer" || cm.Spec.TLS.CertManager.IssuerRef.Group != "cert-manager.io" {
		t.Errorf("issuerRef defaulted to %+v", cm.Spec.TLS.CertManager.IssuerRef)
	}
	for name, tt := range map[string]struct {
		c      *etcdv1alpha1.EtcdCluster
		mutate func(*etcdv1alpha1.EtcdCluster)
		want   string // "": accepted
	}{
		"member Secret": {byo, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.TLS.Secrets.MemberSecretName = "m2" }, "tls.secrets.memberSecretName cannot change"},
		"client Secret": {byo, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.TLS.Secrets.ClientSecretName = "c2" }, ""},
		"issuer":        {cm, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.TLS.CertManager.IssuerRef.Name = "other" }, "tls.certManager.issuerRef cannot change"},
		"issuer kind":   {cm, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.TLS.CertManager.IssuerRef.Kind = "ClusterIssuer" }, "tls.certManager.issuerRef cannot change"},
		"lifetime": {cm, func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.TLS.CertificateLifetime = &metav1.Duration{Duration: 24 * time.Hour}
		}, ""},
		"drop the issuer": {cm, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.TLS.CertManager = nil }, "tls.certManager (issuerRef) is required"},
	} {
		t.Run(name, func(t *testing.T) {
			var cur etcdv1alpha1.EtcdCluster
			if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(tt.c), &cur); err != nil {
				t.Fatal(err)
			}
			tt.mutate(&cur)
			err := framework.K8s.Update(ctx, &cur)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}

// TestVersionJumpsRefusedAtAdmission: the version changes etcd cannot make in one go are refused at admission
// with a message saying why, and the spec keeps its version: down two minors (etcd's downgrade API moves one),
// and up two minors with a pinned image (Steward would not know the image of the release in between; without
// one, TestMultiMinorUpgradeUnderLoad passes through it).
func TestVersionJumpsRefusedAtAdmission(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "bad")
	tests := map[string]struct {
		from, to, image string
		want            string
	}{
		"down two minors":               {from: "3.7.3", to: "3.5.35", want: "version may go down by at most one minor version at a time"},
		"down two minors, to a .0":      {from: "3.7.3", to: "3.5.0", want: "version may go down by at most one minor version at a time"},
		"up two minors, pinned image":   {from: "3.5.35", to: "3.7.3", image: testbed.EtcdRepository + ":v3.5.35", want: "with spec.image set, version may go up by at most one minor"},
		"up two minors to a .0, pinned": {from: "3.5.35", to: "3.7.0", image: testbed.EtcdRepository + ":v3.5.35", want: "with spec.image set"},
	}
	i := 0
	for name, tt := range tests {
		i++
		c := framework.NewCluster(ns, fmt.Sprintf("jumpy-%d", i), 1)
		c.Spec.Version, c.Spec.Image = tt.from, tt.image
		if err := framework.K8s.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		t.Run(name, func(t *testing.T) {
			var cur etcdv1alpha1.EtcdCluster
			if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(c), &cur); err != nil {
				t.Fatal(err)
			}
			cur.Spec.Version = tt.to
			err := framework.K8s.Update(ctx, &cur)
			if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("%s -> %s: error %v, want a refusal saying %q", tt.from, tt.to, err, tt.want)
			}
			var after etcdv1alpha1.EtcdCluster
			if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(c), &after); err != nil {
				t.Fatal(err)
			}
			if after.Spec.Version != tt.from {
				t.Fatalf("version after a refused change: %s, want %s", after.Spec.Version, tt.from)
			}
		})
		_ = framework.K8s.Delete(ctx, c)
	}
}
