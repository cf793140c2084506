package e2e

import (
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"steward.dev/steward/test/e2e/framework"
)

// How tests share the test bed (see the package comment): parallel or serial first, then NewNamespace for
// every namespace the test uses and StartOperator on them.

// running counts the tests that are past parallel() or serial() and not yet cleaned up, for the CPU profile.
var running atomic.Int32

// parallel marks t as a test that shares the test bed with other tests running at the same time: it uses only
// namespaces of its own and an operator watching only them, touches no cluster-scoped object but the volumes of
// its own claims, and asserts no timing that other tests' load could break (lower bounds, such as "not replaced
// before the grace period", are fine: load only makes things slower). It returns once the test may start:
// with -parallel N at most N run at a time, the longest first.
func parallel(t *testing.T) {
	t.Helper()
	framework.RequireBed(t)
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
	framework.RequireBed(t)
	t.Logf("serial: %s", why)
	track(t)
}

func track(t *testing.T) {
	running.Add(1)
	t.Cleanup(func() { running.Add(-1) })
}

// gate admits parallel tests, at most slots at a time, the longest expected first (longest processing time
// first: a long test started last would run on alone at the end). go test's own -parallel limit would admit
// them in whatever order their goroutines wake, so TestMain takes -parallel N for the gate and lifts go's limit.
var gate = &scheduler{slots: 1}

// expected is each test's running time under -parallel 3 (as measured in the suite's full runs, rounded; `make
// test` prints them, docs/development/testing.md keeps them), for the order only. A test not listed counts as defaultExpected, which puts it early: an
// unknown test is more likely long than short.
var expected = map[string]time.Duration{
	"TestMetricsAndAlerts":                              280 * time.Second,
	"TestWedgedMembersAreRestartedByTheirLivenessProbe": 150 * time.Second,
	"TestTLSSwitchUnderLoad":                            230 * time.Second,
	"TestContinuousBackupPointInTime":                   220 * time.Second,
	"TestStandbyFollowsAndPromotes":                     60 * time.Second,
	"TestRestore":                                       210 * time.Second,
	"TestHibernationUnderLoad":                          200 * time.Second,
	"TestStorageExpansionInPlace":                       40 * time.Second,
	"TestTLSProviderCertManager":                        160 * time.Second,
	"TestExternalClientThroughServiceTemplate":          35 * time.Second,
	"TestPeerPortRefusesClientCertificates":             40 * time.Second,
	"TestTLSProviderSecrets":                            160 * time.Second,
	"TestPodLossThreeMembers":                           150 * time.Second,
	"TestHashMismatchIsFoundAndReplaced":                140 * time.Second,
	"TestStorageClassMigration":                         130 * time.Second,
	"TestBackup":                                        130 * time.Second,
	"TestGCSBackups":                                    120 * time.Second,
	"TestAzureBackups":                                  120 * time.Second,
	"TestHostileSpecsCELCannotCatchAreReported":         120 * time.Second,
	"TestEmptiedVolumeOfJoinedMemberAfterPodLoss":       110 * time.Second,
	"TestEtcdUsersAndAuth":                              110 * time.Second,
	"TestRollbackHealthyCluster":                        110 * time.Second,
	"TestCertificateRotationUnderLoad":                  30 * time.Second,
	"TestAuthWithoutTLS":                                90 * time.Second,
	"TestNamespaceDeletion":                             90 * time.Second,
	"TestUnreachableMemberIsReplacedAfterGracePeriod":   90 * time.Second,
	"TestScaleUpAndDownUnderLoad":                       90 * time.Second,
	"TestGettingStartedTutorial":                        80 * time.Second,
	"TestTLSSwitchWithAuth":                             80 * time.Second,
	"TestMinorUpgradesUnderLoad":                        80 * time.Second,
	"TestMultiMinorUpgradeUnderLoad":                    80 * time.Second,
	"TestBootstrapResumesAfterOperatorCrash":            70 * time.Second,
	"TestEmptiedVolumeOfOneMemberCluster":               60 * time.Second,
	"TestWipedFirstMemberOfGrownCluster":                60 * time.Second,
	"TestInitialCorruptionCheck":                        60 * time.Second,
	"TestPasswordOnlyClients":                           50 * time.Second,
	"TestNoSpaceAlarmIsReported":                        50 * time.Second,
	"TestPodLossDuringTLSSwitch":                        50 * time.Second,
	"TestDowngradesUnderLoad":                           50 * time.Second,
	"TestNoSpaceQuotaRaised":                            50 * time.Second,
	"TestEmptiedDataDirIsReplaced":                      40 * time.Second,
	"TestKubectlPlugin":                                 40 * time.Second,
	"TestPodLossFiveMembers":                            40 * time.Second,
	"TestScaleUpSurvivesOperatorRestartAtEveryStep":     40 * time.Second,
	"TestTLSByDefault":                                  40 * time.Second,
	"TestVersionChangeOfMind":                           40 * time.Second,
	"TestHostileImageChangeReplacesNothing":             40 * time.Second,
	"TestPodLossDuringUpgrade":                          40 * time.Second,
	"TestPodLossVolumeDeletedUnderRunningMember":        40 * time.Second,
	"TestHelmInstallUpgradeUninstall":                   30 * time.Second,
	"TestUpgradeContinuesAfterMemberFailure":            30 * time.Second,
	"TestUpgradeSurvivesOperatorRestarts":               30 * time.Second,
	"TestDefragmentation":                               30 * time.Second,
	"TestMemberWithLostDataIsReplaced":                  30 * time.Second,
	"TestHostileSpecsAreRefused":                        30 * time.Second,
	"TestPatchUpgradeUnderLoad":                         20 * time.Second,
	"TestSharedIssuerIsNotRoot":                         20 * time.Second,
	"TestPodLossOneMember":                              20 * time.Second,
	"TestNoSpaceRecovery":                               20 * time.Second,
	"TestThreeMemberCluster":                            20 * time.Second,
	"TestHostileUpdatesChangeNothing":                   20 * time.Second,
	"TestStrayMembersAreRemoved":                        10 * time.Second,
	"TestAdoptRunningEtcd":                              65 * time.Second,
	"TestAdoptionRefusedThenAborted":                    70 * time.Second,
	"TestAdoptionDeletedMidway":                         55 * time.Second,
	"TestKubeAPIServerThroughAdoption":                  45 * time.Second,
	"TestNamespaceScopedInstallWithLeastPrivilege":      10 * time.Second,
	"TestEtcdUserNameConflict":                          10 * time.Second,
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
	// frees frees an admitted test's slot, by test name (once; see leave).
	frees sync.Map
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
	free := sync.OnceFunc(func() {
		t.Logf("ran %s after waiting %s for a slot (-parallel %d)", time.Since(admitted).Round(100*time.Millisecond),
			admitted.Sub(began).Round(100*time.Millisecond), s.slots)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.busy--
		s.dispatch()
	})
	s.frees.Store(t.Name(), free)
	t.Cleanup(func() {
		s.frees.Delete(t.Name())
		free()
	})
}

// leave frees t's slot ahead of the rest of its cleanups: framework.NewNamespace calls it (as
// framework.BeforeNamespaceDeletion) when its test's namespace deletion begins, since a test's Pods are gone
// at once and the rest (the namespace controller emptying the namespace, 4-30 s) costs the machine little. Only a
// test's own slot is freed: a subtest's namespace going leaves its parent running.
func (s *scheduler) leave(t *testing.T) {
	if free, ok := s.frees.LoadAndDelete(t.Name()); ok {
		free.(func())()
	}
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
