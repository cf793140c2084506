package framework

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/testbed"
)

// BeforeNamespaceDeletion is called, when set, with the test whose namespace is about to be deleted, after the
// test and its operator are done: the suite frees the test's slot there (the gate in test/e2e).
var BeforeNamespaceDeletion func(t *testing.T)

// NewNamespace creates a namespace for t alone, named base plus a random suffix (tests, and reruns of one test
// in one process, never meet in a namespace), and deletes it with everything in it when t ends, waiting until it
// is gone, so that no member Pod of a finished test eats the CPU the next tests need. With STEWARD_E2E_KEEP=1 a
// failed test's namespaces stay.
func NewNamespace(t *testing.T, base string) string {
	t.Helper()
	return newNamespace(t, base, map[string]string{"e2e.steward.dev/test": LabelValue(t)})
}

// NewScrapedNamespace is NewNamespace for a namespace whose member and operator Pods the test bed's Prometheus
// scrapes: the suite's test bed scrapes only the namespaces that ask (testbed.ScrapeLabel).
func NewScrapedNamespace(t *testing.T, base string) string {
	t.Helper()
	return newNamespace(t, base, map[string]string{"e2e.steward.dev/test": LabelValue(t), testbed.ScrapeLabel: "true"})
}

func newNamespace(t *testing.T, base string, labels map[string]string) string {
	t.Helper()
	name := base + "-" + utilrand.String(5)
	if err := K8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}); err != nil {
		t.Fatal(err)
	}
	// Registered before the test starts its operator, so it runs after the operator stopped (cleanups run last
	// registered first): nothing re-creates what it deletes.
	t.Cleanup(func() {
		if t.Failed() && KeepForDiagnosis() {
			t.Logf("STEWARD_E2E_KEEP=1: namespace %s kept for diagnosis", name)
			return
		}
		if BeforeNamespaceDeletion != nil {
			BeforeNamespaceDeletion(t)
		}
		began := time.Now()
		if err := DeleteNamespace(name, 4*time.Minute); err != nil {
			t.Errorf("clean up after the test: %v", err)
			return
		}
		t.Logf("namespace %s gone %s after its deletion", name, time.Since(began).Round(100*time.Millisecond))
	})
	return name
}

// DeleteNamespace deletes namespace ns and waits until it is gone. Member Pods go at once (no grace period:
// the test is over, and a test may have held some with a finalizer of its own), and the finalizers of
// EtcdBackups and EtcdUsers are dropped, since no operator runs any more to delete their snapshots (those live
// under the namespace's own key prefix or volume, and go with the test bed) or their etcd users (which go with
// the namespace's clusters), and those of EtcdClusters (an adoption's abort, whose source the test stopped).
func DeleteNamespace(ns string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := K8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	if err := K8s.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Pods of %s: %w", ns, err)
	}
	var last string
	for {
		var pods corev1.PodList
		if err := K8s.List(ctx, &pods, client.InNamespace(ns)); err == nil {
			for i := range pods.Items {
				p := &pods.Items[i]
				if len(p.Finalizers) > 0 {
					patch := client.MergeFrom(p.DeepCopy())
					p.Finalizers = nil
					_ = K8s.Patch(ctx, p, patch)
				}
			}
		}
		var backups etcdv1alpha1.EtcdBackupList
		if err := K8s.List(ctx, &backups, client.InNamespace(ns)); err == nil {
			for i := range backups.Items {
				b := &backups.Items[i]
				if len(b.Finalizers) > 0 {
					patch := client.MergeFrom(b.DeepCopy())
					b.Finalizers = nil
					_ = K8s.Patch(ctx, b, patch) // a conflict or a gone object: the next round sees
				}
			}
		}
		var users etcdv1alpha1.EtcdUserList
		if err := K8s.List(ctx, &users, client.InNamespace(ns)); err == nil {
			for i := range users.Items {
				u := &users.Items[i]
				if len(u.Finalizers) > 0 {
					patch := client.MergeFrom(u.DeepCopy())
					u.Finalizers = nil
					_ = K8s.Patch(ctx, u, patch) // their etcd users go with the cluster
				}
			}
		}
		var clusters etcdv1alpha1.EtcdClusterList
		if err := K8s.List(ctx, &clusters, client.InNamespace(ns)); err == nil {
			for i := range clusters.Items {
				c := &clusters.Items[i]
				if len(c.Finalizers) > 0 {
					patch := client.MergeFrom(c.DeepCopy())
					c.Finalizers = nil
					_ = K8s.Patch(ctx, c, patch) // an adoption's: the test's source processes are gone with it
				}
			}
		}
		err := K8s.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		last = LeftIn(ctx, ns)
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %s not gone after %s: %s", ns, timeout, last)
		case <-time.After(time.Second):
		}
	}
}

// LeftIn names what keeps a namespace from going away.
func LeftIn(ctx context.Context, ns string) string {
	var left []string
	var pods corev1.PodList
	if err := K8s.List(ctx, &pods, client.InNamespace(ns)); err == nil {
		for _, p := range pods.Items {
			left = append(left, "pod/"+p.Name)
		}
	}
	var pvcs corev1.PersistentVolumeClaimList
	if err := K8s.List(ctx, &pvcs, client.InNamespace(ns)); err == nil {
		for _, p := range pvcs.Items {
			left = append(left, fmt.Sprintf("pvc/%s%v", p.Name, p.Finalizers))
		}
	}
	var backups etcdv1alpha1.EtcdBackupList
	if err := K8s.List(ctx, &backups, client.InNamespace(ns)); err == nil {
		for _, b := range backups.Items {
			left = append(left, fmt.Sprintf("etcdbackup/%s%v", b.Name, b.Finalizers))
		}
	}
	sort.Strings(left)
	if len(left) == 0 {
		return "nothing listed (other kinds, or the namespace controller has not finished)"
	}
	return strings.Join(left, ", ")
}

// LabelValue is t's name as a label value (at most 63 characters of [A-Za-z0-9._-]).
func LabelValue(t *testing.T) string {
	b := []byte(t.Name())
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '-':
		default:
			b[i] = '_'
		}
	}
	s := strings.Trim(string(b), "_.-")
	if len(s) > 63 {
		s = strings.TrimRight(s[:63], "_.-")
	}
	return s
}

// KeepForDiagnosis is STEWARD_E2E_KEEP=1: a failed test leaves its namespaces (and a failed run the test bed)
// for a human to look at.
func KeepForDiagnosis() bool { return os.Getenv("STEWARD_E2E_KEEP") == "1" }
