package e2e

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// How tests share the test bed (see the package comment): parallel or serial first, then newNamespace for
// every namespace the test uses and startOperator on them.

// running counts the tests that are past parallel() or serial() and not yet cleaned up, for the CPU profile.
var running atomic.Int32

// parallel marks t as a test that shares the test bed with other tests running at the same time: it uses only
// namespaces of its own and an operator watching only them, touches no cluster-scoped object but the volumes of
// its own claims, and asserts no timing that other tests' load could break (lower bounds, such as "not replaced
// before the grace period", are fine: load only makes things slower). It returns once the test may start:
// with -parallel N at most N run at a time, the longest first.
func parallel(t *testing.T) {
	t.Helper()
	requireBed(t)
	t.Parallel()
	d, ok := expected[t.Name()]
	if !ok {
		d = defaultExpected
	}
	gate.enter(t, d)
	track(t)
}

// serial marks t as a test that must have the test bed to itself, for the reason why; serial tests run one after
// the other before the parallel tests start (go test runs a package's sequential tests first).
func serial(t *testing.T, why string) {
	t.Helper()
	requireBed(t)
	t.Logf("serial: %s", why)
	track(t)
}

func track(t *testing.T) {
	running.Add(1)
	t.Cleanup(func() { running.Add(-1) })
}

// keepForDiagnosis is STEWARD_E2E_KEEP=1: a failed test leaves its namespaces (and a failed run the test bed)
// for a human to look at.
func keepForDiagnosis() bool { return os.Getenv("STEWARD_E2E_KEEP") == "1" }

// newNamespace creates a namespace for t alone, named base plus a random suffix (tests, and reruns of one test
// in one process, never meet in a namespace), and deletes it with everything in it when t ends, waiting until it
// is gone, so that no member Pod of a finished test eats the CPU the next tests need. With STEWARD_E2E_KEEP=1 a
// failed test's namespaces stay.
func newNamespace(t *testing.T, base string) string {
	t.Helper()
	name := base + "-" + utilrand.String(5)
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{"e2e.steward.dev/test": testLabel(t)}}}); err != nil {
		t.Fatal(err)
	}
	// Registered before the test starts its operator, so it runs after the operator stopped (cleanups run last
	// registered first): nothing re-creates what it deletes.
	t.Cleanup(func() {
		if t.Failed() && keepForDiagnosis() {
			t.Logf("STEWARD_E2E_KEEP=1: namespace %s kept for diagnosis", name)
			return
		}
		if err := deleteNamespace(name, 4*time.Minute); err != nil {
			t.Errorf("clean up after the test: %v", err)
		}
	})
	return name
}

// testLabel is t's name as a label value (at most 63 characters of [A-Za-z0-9._-]).
func testLabel(t *testing.T) string {
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

// deleteNamespace deletes namespace ns and waits until it is gone. Member Pods go at once (no grace period:
// the test is over, and a test may have held some with a finalizer of its own), and the finalizers of
// EtcdBackups and EtcdUsers are dropped, since no operator runs any more to delete their snapshots (those live
// under the namespace's own key prefix or volume, and go with the test bed) or their etcd users (which go with
// the namespace's clusters).
func deleteNamespace(ns string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	if err := k8s.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Pods of %s: %w", ns, err)
	}
	var last string
	for {
		var pods corev1.PodList
		if err := k8s.List(ctx, &pods, client.InNamespace(ns)); err == nil {
			for i := range pods.Items {
				p := &pods.Items[i]
				if len(p.Finalizers) > 0 {
					patch := client.MergeFrom(p.DeepCopy())
					p.Finalizers = nil
					_ = k8s.Patch(ctx, p, patch)
				}
			}
		}
		var backups etcdv1alpha1.EtcdBackupList
		if err := k8s.List(ctx, &backups, client.InNamespace(ns)); err == nil {
			for i := range backups.Items {
				b := &backups.Items[i]
				if len(b.Finalizers) > 0 {
					patch := client.MergeFrom(b.DeepCopy())
					b.Finalizers = nil
					_ = k8s.Patch(ctx, b, patch) // a conflict or a gone object: the next round sees
				}
			}
		}
		var users etcdv1alpha1.EtcdUserList
		if err := k8s.List(ctx, &users, client.InNamespace(ns)); err == nil {
			for i := range users.Items {
				u := &users.Items[i]
				if len(u.Finalizers) > 0 {
					patch := client.MergeFrom(u.DeepCopy())
					u.Finalizers = nil
					_ = k8s.Patch(ctx, u, patch) // their etcd users go with the cluster
				}
			}
		}
		err := k8s.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		last = leftIn(ctx, ns)
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %s not gone after %s: %s", ns, timeout, last)
		case <-time.After(time.Second):
		}
	}
}

// leftIn names what keeps a namespace from going away.
func leftIn(ctx context.Context, ns string) string {
	var left []string
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(ns)); err == nil {
		for _, p := range pods.Items {
			left = append(left, "pod/"+p.Name)
		}
	}
	var pvcs corev1.PersistentVolumeClaimList
	if err := k8s.List(ctx, &pvcs, client.InNamespace(ns)); err == nil {
		for _, p := range pvcs.Items {
			left = append(left, fmt.Sprintf("pvc/%s%v", p.Name, p.Finalizers))
		}
	}
	var backups etcdv1alpha1.EtcdBackupList
	if err := k8s.List(ctx, &backups, client.InNamespace(ns)); err == nil {
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

// gate admits parallel tests, at most slots at a time, the longest expected first (longest processing time
// first: a long test started last would run on alone at the end). go test's own -parallel limit would admit
// them in whatever order their goroutines wake, so TestMain takes -parallel N for the gate and lifts go's limit.
var gate = &scheduler{slots: 1}

// expected is each test's running time under -parallel 3 (as measured in the suite's full runs, rounded; `make
// test` prints them, docs/development/testing.md keeps them), for the order only. A test not listed counts as defaultExpected, which puts it early: an
// unknown test is more likely long than short.
var expected = map[string]time.Duration{
	"TestMetricsAndAlerts":                              440 * time.Second,
	"TestRestore":                                       290 * time.Second,
	"TestTLSSwitchUnderLoad":                            250 * time.Second,
	"TestPeerPortRefusesClientCertificates":             240 * time.Second,
	"TestWedgedMembersAreRestartedByTheirLivenessProbe": 230 * time.Second,
	"TestStorageExpansionInPlace":                       200 * time.Second,
	"TestContinuousBackupPointInTime":                   180 * time.Second,
	"TestBackup":                                        140 * time.Second,
	"TestStorageClassMigration":                         140 * time.Second,
	"TestTLSProviderCertManager":                        140 * time.Second,
	"TestHashMismatchIsFoundAndReplaced":                130 * time.Second,
	"TestPodLossThreeMembers":                           130 * time.Second,
	"TestTLSProviderSecrets":                            120 * time.Second,
	"TestTLSSwitchWithAuth":                             120 * time.Second,
	"TestHostileSpecsCELCannotCatchAreReported":         120 * time.Second,
	"TestEtcdUsersAndAuth":                              110 * time.Second,
	"TestRollbackHealthyCluster":                        110 * time.Second,
	"TestAuthWithoutTLS":                                100 * time.Second,
	"TestEmptiedVolumeOfJoinedMemberAfterPodLoss":       100 * time.Second,
	"TestGettingStartedTutorial":                        100 * time.Second,
	"TestMinorUpgradesUnderLoad":                        90 * time.Second,
	"TestUnreachableMemberIsReplacedAfterGracePeriod":   90 * time.Second,
	"TestPasswordOnlyClients":                           80 * time.Second,
	"TestNamespaceDeletion":                             80 * time.Second,
	"TestMultiMinorUpgradeUnderLoad":                    80 * time.Second,
	"TestPodLossDuringTLSSwitch":                        70 * time.Second,
	"TestEmptiedVolumeOfOneMemberCluster":               70 * time.Second,
	"TestScaleUpAndDownUnderLoad":                       70 * time.Second,
	"TestDowngradesUnderLoad":                           60 * time.Second,
	"TestInitialCorruptionCheck":                        60 * time.Second,
	"TestTLSByDefault":                                  60 * time.Second,
	"TestSharedIssuerIsNotRoot":                         60 * time.Second,
	"TestEmptiedDataDirIsReplaced":                      60 * time.Second,
	"TestWipedFirstMemberOfGrownCluster":                60 * time.Second,
	"TestVersionChangeOfMind":                           60 * time.Second,
	"TestPodLossDuringUpgrade":                          60 * time.Second,
	"TestHostileImageChangeReplacesNothing":             60 * time.Second,
	"TestBootstrapResumesAfterOperatorCrash":            60 * time.Second,
	"TestUpgradeContinuesAfterMemberFailure":            50 * time.Second,
	"TestKubectlPlugin":                                 50 * time.Second,
	"TestUpgradeSurvivesOperatorRestarts":               50 * time.Second,
	"TestPodLossFiveMembers":                            50 * time.Second,
	"TestHelmInstallUpgradeUninstall":                   50 * time.Second,
	"TestNoSpaceAlarmIsReported":                        50 * time.Second,
	"TestScaleUpSurvivesOperatorRestartAtEveryStep":     50 * time.Second,
	"TestNoSpaceQuotaRaised":                            40 * time.Second,
	"TestPatchUpgradeUnderLoad":                         40 * time.Second,
	"TestDefragmentation":                               40 * time.Second,
	"TestMemberWithLostDataIsReplaced":                  40 * time.Second,
	"TestPodLossVolumeDeletedUnderRunningMember":        30 * time.Second,
	"TestPodLossOneMember":                              30 * time.Second,
	"TestStrayMembersAreRemoved":                        30 * time.Second,
	"TestHostileSpecsAreRefused":                        30 * time.Second,
	"TestEtcdUserNameConflict":                          60 * time.Second,
	"TestNoSpaceRecovery":                               20 * time.Second,
	"TestNamespaceScopedInstallWithLeastPrivilege":      20 * time.Second,
	"TestCertificateRotationUnderLoad":                  20 * time.Second,
	"TestThreeMemberCluster":                            20 * time.Second,
	"TestHostileUpdatesChangeNothing":                   20 * time.Second,
	"TestOneMemberCluster":                              10 * time.Second,
	"TestTLSProviderFieldsAreImmutable":                 10 * time.Second,
	"TestBadSpecsAreRefusedAtAdmission":                 10 * time.Second,
	"TestVersionJumpsRefusedAtAdmission":                10 * time.Second,
	// The tests on the dedicated nodes (issue 19) take no slot: parallelOnDedicatedNodes.
}

const defaultExpected = 2 * time.Minute

// gathering is how long the gate waits after the first parallel test arrives before it admits any: go test
// releases every parallel test at once when the serial ones are done, and they all arrive within milliseconds.
const gathering = 300 * time.Millisecond

type scheduler struct {
	mu    sync.Mutex
	slots int
	busy  int
	// arrivals, when set, ends the gathering as soon as that many tests wait (a test of the gate knows how many
	// will come; go test does not say).
	arrivals int
	// started: the first test arrived; gathered: the others had time to.
	started, gathered bool
	waiting           []*ticket
	// admitted: names in the order they were given a slot (the order their goroutines then run in is the
	// runtime's).
	admitted []string
}

type ticket struct {
	name     string
	expected time.Duration
	admit    chan struct{}
}

// setSlots sets how many tests run at a time (go test's -parallel value).
func (s *scheduler) setSlots(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.slots = max(1, n)
}

// enter blocks until t, expected to take d, may run, and frees its slot when t ends (after its other
// cleanups: its namespaces are gone by then).
func (s *scheduler) enter(t *testing.T, d time.Duration) {
	t.Helper()
	tk := &ticket{name: t.Name(), expected: d, admit: make(chan struct{})}
	s.mu.Lock()
	s.waiting = append(s.waiting, tk)
	switch {
	case !s.gathered && s.arrivals > 0 && len(s.waiting) >= s.arrivals:
		s.started, s.gathered = true, true
		s.dispatch()
	case !s.started:
		s.started = true
		time.AfterFunc(gathering, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.gathered {
				return
			}
			s.gathered = true
			s.dispatch()
		})
	case s.gathered:
		s.dispatch()
	}
	s.mu.Unlock()
	began := time.Now()
	<-tk.admit
	admitted := time.Now()
	// go test's time for a parallel test includes the wait for a slot: this line gives both.
	t.Cleanup(func() {
		t.Logf("ran %s after waiting %s for a slot (-parallel %d)", time.Since(admitted).Round(100*time.Millisecond),
			admitted.Sub(began).Round(100*time.Millisecond), s.slots)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.busy--
		s.dispatch()
	})
}

// dispatch admits the longest waiting tests into free slots. Called with mu held.
func (s *scheduler) dispatch() {
	sort.SliceStable(s.waiting, func(i, j int) bool { return s.waiting[i].expected > s.waiting[j].expected })
	for s.busy < s.slots && len(s.waiting) > 0 {
		close(s.waiting[0].admit)
		s.admitted = append(s.admitted, s.waiting[0].name)
		s.waiting = s.waiting[1:]
		s.busy++
	}
}
