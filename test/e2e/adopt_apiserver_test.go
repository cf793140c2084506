package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/internal/testbed"
	"steward.dev/steward/test/e2e/framework"
	"steward.dev/steward/test/linearizability"
)

// TestKubeAPIServerThroughAdoption: a kube-apiserver on the host stores in a plaintext source of three etcd
// processes, its --etcd-servers listing the source's members and Steward's client Service, and keeps creating
// ConfigMaps while the source is adopted with `kubectl steward adopt` and retired with `kubectl steward handover
// retire`. It keeps serving throughout; every ConfigMap whose creation it acknowledged is there afterwards with
// the resourceVersion it was created at, and a watch opened before the adoption delivers every one of them
// (resumed, if it ends, from the last resourceVersion it delivered, which the adopted cluster still serves). An
// etcd client load beside it loses no acknowledged write.
func TestKubeAPIServerThroughAdoption(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns, src, _, before := adoptionSource(t, "adopt-kas", false)
	const name = "control-plane"
	mustPlugin(t, ns, "adopt", name, "--endpoints", strings.Join(src.ClientURLs, ","), "--version", testbed.EtcdVersions[0], "--storage-size", "1Gi")
	key := client.ObjectKey{Namespace: ns, Name: name}
	svcIP, svcURL := clientServiceAddress(t, ns, name)
	kas := framework.StartKubeAPIServer(t, append(append([]string(nil), src.ClientURLs...), svcURL))
	writes := startConfigMapWriter(t, kas)
	load, err := linearizability.Start(linearizability.Config{Endpoints: src.ClientURLs,
		Alternates: []linearizability.Target{{Endpoints: []string{svcURL}}}})
	if err != nil {
		t.Fatal(err)
	}

	begin := time.Now()
	got := waitAdoption(t, key, "Steward's members voters beside the source's", 6*time.Minute, func(c *etcdv1alpha1.EtcdCluster) error {
		if a := c.Status.Adoption; a == nil || a.Phase != etcdv1alpha1.AdoptionMigrating || progressing(c).Reason != etcdv1alpha1.ReasonAdoptionWaitingForHandover {
			return fmt.Errorf("adoption %+v, progressing %s", a, progressing(c).Reason)
		}
		return nil
	}, src)
	t.Logf("3 members joined the source in %s", time.Since(begin).Round(time.Second))
	framework.WaitServiceRouted(t, got, fmt.Sprintf("%s:%d", svcIP, resources.ClientPort))
	mustPlugin(t, ns, "handover", name, "retire")
	waitAdoption(t, key, "the source's members retired", 4*time.Minute, func(c *etcdv1alpha1.EtcdCluster) error {
		if a := c.Status.Adoption; a == nil || a.Phase != etcdv1alpha1.AdoptionComplete || len(a.Retired) != 3 {
			return fmt.Errorf("adoption %+v", a)
		}
		return nil
	}, src)
	got = framework.WaitSettled(t, key, 2*time.Minute)
	t.Logf("adopted and the source retired %s after the adoption began", time.Since(begin).Round(time.Second))
	// The kube-apiserver's only etcd endpoint that still serves is Steward's Service now: writes go on there.
	writes.waitFor(t, 20)
	created, failed := writes.stop()

	stw, err := clientv3.New(clientv3.Config{Endpoints: []string{framework.ClientServiceURL(t, got)}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stw.Close() }()
	after, err := stw.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Header.ClusterId != before.Header.ClusterId || len(after.Members) != 3 {
		t.Errorf("after the adoption: cluster %x with %d members, want %x with Steward's 3", after.Header.ClusterId, len(after.Members), before.Header.ClusterId)
	}

	var list *corev1.ConfigMapList
	framework.Poll(t, "the kube-apiserver lists its ConfigMaps", time.Minute, func() (err error) {
		list, err = kas.Client.CoreV1().ConfigMaps(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		return err
	})
	stored := map[string]string{}
	for _, cm := range list.Items {
		stored[cm.Name] = cm.ResourceVersion
	}
	missing := 0
	for n, rv := range created {
		if stored[n] != rv {
			missing++
			if missing <= 5 {
				t.Errorf("ConfigMap %s created at resourceVersion %s: listed at %q", n, rv, stored[n])
			}
		}
	}
	seen, resumed := writes.watched(t, created)
	t.Logf("the kube-apiserver acknowledged %d ConfigMap creations (%d failed or of unknown outcome) through the adoption: %d missing; its watch delivered %d of them, resumed %d times",
		len(created), failed, missing, seen, resumed)
	if missing > 0 {
		t.Errorf("%d of %d acknowledged ConfigMaps missing or changed", missing, len(created))
	}
	if seen != len(created) {
		t.Errorf("the watch opened before the adoption delivered %d of %d acknowledged creations", seen, len(created))
	}
	framework.RequireNoLostWrites(t, load, "adopting the etcd of a kube-apiserver")
}

// configMapWriter creates ConfigMaps through a kube-apiserver, one after another, and watches them from the
// resourceVersion before the first.
type configMapWriter struct {
	stopWrites, stopWatch context.CancelFunc
	writing, watching     sync.WaitGroup
	mu                    sync.Mutex
	created               map[string]string // name: resourceVersion of its acknowledged creation
	failed                int
	events                map[string]string // name: resourceVersion of its ADDED event
	resumed               int
	watchErr              error
}

func startConfigMapWriter(t *testing.T, kas *framework.HostAPIServer) *configMapWriter {
	t.Helper()
	ctx, stopWrites := context.WithCancel(context.Background())
	watchCtx, stopWatch := context.WithCancel(context.Background())
	w := &configMapWriter{stopWrites: stopWrites, stopWatch: stopWatch, created: map[string]string{}, events: map[string]string{}}
	cms := kas.Client.CoreV1().ConfigMaps(metav1.NamespaceDefault)
	start, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.writing.Add(1)
	w.watching.Add(1)
	go func() {
		defer w.writing.Done()
		for i := 0; ctx.Err() == nil; i++ {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%05d", i)}, Data: map[string]string{"i": fmt.Sprint(i)}}
			rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
			got, err := cms.Create(rctx, cm, metav1.CreateOptions{})
			rcancel()
			w.mu.Lock()
			if err == nil {
				w.created[got.Name] = got.ResourceVersion
			} else if ctx.Err() == nil {
				w.failed++
			}
			w.mu.Unlock()
			if err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	go func() {
		defer w.watching.Done()
		ctx := watchCtx
		rv := start.ResourceVersion
		for ctx.Err() == nil {
			wi, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
			if err != nil {
				if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					w.mu.Lock()
					w.watchErr = fmt.Errorf("resuming the watch from resourceVersion %s: %w", rv, err)
					w.mu.Unlock()
					return
				}
				time.Sleep(500 * time.Millisecond)
				continue
			}
			for ev := range wi.ResultChan() {
				if ev.Type == watch.Error {
					if status := apierrors.FromObject(ev.Object); apierrors.IsResourceExpired(status) || apierrors.IsGone(status) {
						w.mu.Lock()
						w.watchErr = fmt.Errorf("the watch from resourceVersion %s ended: %w", rv, status)
						w.mu.Unlock()
						wi.Stop()
						return
					}
					continue
				}
				cm, ok := ev.Object.(*corev1.ConfigMap)
				if !ok {
					continue
				}
				rv = cm.ResourceVersion
				if ev.Type == watch.Added {
					w.mu.Lock()
					w.events[cm.Name] = cm.ResourceVersion
					w.mu.Unlock()
				}
			}
			if ctx.Err() == nil {
				w.mu.Lock()
				w.resumed++ // the kube-apiserver ended the watch: it is opened again from the last resourceVersion
				w.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		w.stopWrites()
		w.stopWatch()
		w.writing.Wait()
		w.watching.Wait()
	})
	return w
}

// waitFor waits until n more creations have been acknowledged.
func (w *configMapWriter) waitFor(t *testing.T, n int) {
	t.Helper()
	w.mu.Lock()
	want := len(w.created) + n
	w.mu.Unlock()
	framework.Poll(t, fmt.Sprintf("%d more ConfigMaps created", n), 2*time.Minute, func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if len(w.created) < want {
			return fmt.Errorf("%d of %d created (%d failed)", len(w.created), want, w.failed)
		}
		return nil
	})
}

// stop ends the writes and returns the creations acknowledged and the number that failed (or whose outcome is
// unknown); the watch goes on until watched has seen them.
func (w *configMapWriter) stop() (map[string]string, int) {
	w.stopWrites()
	w.writing.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	created := make(map[string]string, len(w.created))
	for k, v := range w.created {
		created[k] = v
	}
	return created, w.failed
}

// watched waits (up to a minute) until the watch has delivered every creation in created, then stops it and
// returns how many it delivered at the resourceVersion of the creation, and how often it was resumed.
func (w *configMapWriter) watched(t *testing.T, created map[string]string) (int, int) {
	t.Helper()
	count := func() int {
		n := 0
		for name, rv := range created {
			if w.events[name] == rv {
				n++
			}
		}
		return n
	}
	_ = testbed.Eventually(context.Background(), time.Minute, 200*time.Millisecond, func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.watchErr != nil || count() == len(created) {
			return nil
		}
		return fmt.Errorf("watched %d of %d", count(), len(created))
	})
	w.stopWatch()
	w.watching.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.watchErr != nil {
		t.Error(w.watchErr)
	}
	return count(), w.resumed
}
