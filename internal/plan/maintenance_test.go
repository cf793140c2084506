package plan

import (
	"fmt"
	"strings"
	"testing"
	"time"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

const mib = int64(1) << 20

// sized is a healthy voter whose database file is size MiB with inUse MiB in use.
func sized(name string, id uint64, size, inUse int64) Member {
	m := at(name, id, "3.6.16")
	m.DBSize, m.DBSizeInUse = size*mib, inUse*mib
	return m
}

func defragSpec() Spec {
	s := specAt("3.6.16")
	s.Maintenance = Maintenance{DefragMinFreeBytes: 64 * mib, DefragMinFreePercent: 50, Quota: 288 * mib}
	return s
}

func recoverySpec() Spec {
	s := defragSpec()
	s.Maintenance.RecoverFromNoSpace, s.Maintenance.RevisionMargin = true, 100
	return s
}

// raisingSpec recovers from NOSPACE with a quota in force of quota MiB, which Steward may raise up to max MiB,
// on volumes of 4 GiB.
func raisingSpec(quota, max int64) Spec {
	s := recoverySpec()
	s.Maintenance.Quota, s.Maintenance.MaxQuota = quota*mib, max*mib
	s.Storage.Size = 4 << 30
	return s
}

// defragmentedAt is m with its volume's record of a defragmentation after the cluster was compacted to rev.
func defragmentedAt(rev int64, m Member) Member {
	m.DefragmentedAtCompaction = rev
	return m
}

// ephemeral is m without a volume (spec.storage.ephemeral): no record of its defragmentations.
func ephemeral(m Member) Member {
	m.HasPVC = false
	return m
}

func withQuota(m Member, quota int64) Member {
	m.PodQuota = quota * mib
	return m
}

func noSpace(rev, compacted int64, members ...Member) Observation {
	o := clusterAt("3.6.0", members...)
	o.NoSpaceAlarm, o.Revision, o.CompactRevision, o.CompactRevisionKnown = true, rev, compacted, true
	return o
}

func TestNextMaintenance(t *testing.T) {
	tests := map[string]struct {
		spec   Spec
		obs    Observation
		want   ActionKind
		reason string
		member string
		msg    string
	}{
		"nothing fragmented: nothing to do": {
			defragSpec(), clusterAt("3.6.0", sized("c-a", 1, 100, 90), sized("c-b", 2, 100, 90), sized("c-c", 3, 100, 90)), None, etcdv1alpha1.ReasonReconciled, "", "",
		},
		"a follower over both thresholds is defragmented": {
			defragSpec(), clusterAt("3.6.0", sized("c-a", 1, 300, 20), sized("c-b", 2, 100, 90), sized("c-c", 3, 300, 20)), Defragment, etcdv1alpha1.ReasonDefragmenting, "c-c", "280.0 MiB of its 300.0 MiB",
		},
		"followers first, by name": {
			defragSpec(), clusterAt("3.6.0", sized("c-a", 1, 300, 20), sized("c-b", 2, 300, 20), sized("c-c", 3, 300, 20)), Defragment, etcdv1alpha1.ReasonDefragmenting, "c-b", "",
		},
		"the leader last, after handing leadership over": {
			defragSpec(), clusterAt("3.6.0", sized("c-a", 1, 300, 20), sized("c-b", 2, 30, 20), sized("c-c", 3, 30, 20)), MoveLeader, etcdv1alpha1.ReasonDefragmenting, "c-a", "before defragmenting c-a",
		},
		"a follower due goes first while another has yet to free the compacted pages": {
			defragSpec(), clusterAt("3.6.0", sized("c-a", 1, 300, 20), sized("c-b", 2, 300, 290), sized("c-c", 3, 300, 20)), Defragment, etcdv1alpha1.ReasonDefragmenting, "c-c", "",
		},
		"the leader the only one due, a follower yet to free the compacted pages: wait for it": {
			defragSpec(), clusterAt("3.6.0", sized("c-a", 1, 300, 20), sized("c-b", 2, 300, 290), sized("c-c", 3, 30, 20)), Wait, etcdv1alpha1.ReasonDefragmenting, "",
			"the leader c-a is due for a defragmentation with 20.0 MiB in use, but c-b has 290.0 MiB in use",
		},
		"a follower with a small file never holds the leader back": {
			defragSpec(), clusterAt("3.6.0", sized("c-a", 1, 300, 20), sized("c-b", 2, 60, 58), sized("c-c", 3, 30, 20)), MoveLeader, etcdv1alpha1.ReasonDefragmenting, "c-a", "",
		},
		"a single member is defragmented where it is": {
			func() Spec { s := defragSpec(); s.Replicas = 1; return s }(), clusterAt("3.6.0", sized("c-a", 1, 300, 20)), Defragment, etcdv1alpha1.ReasonDefragmenting, "c-a", "",
		},
		"much free space but below the ratio: not yet": {
			defragSpec(), clusterAt("3.6.0", sized("c-a", 1, 1000, 600), sized("c-b", 2, 1000, 600), sized("c-c", 3, 1000, 600)), None, etcdv1alpha1.ReasonReconciled, "", "",
		},
		"a high ratio of a small file: not worth it": {
			defragSpec(), clusterAt("3.6.0", sized("c-a", 1, 40, 2), sized("c-b", 2, 40, 2), sized("c-c", 3, 40, 2)), None, etcdv1alpha1.ReasonReconciled, "", "",
		},
		"no threshold set: never": {
			specAt("3.6.16"), clusterAt("3.6.0", sized("c-a", 1, 300, 20), sized("c-b", 2, 300, 20), sized("c-c", 3, 300, 20)), None, etcdv1alpha1.ReasonReconciled, "", "",
		},
		"a running backup is waited for": {
			defragSpec(), func() Observation {
				o := clusterAt("3.6.0", sized("c-a", 1, 300, 20), sized("c-b", 2, 300, 20), sized("c-c", 3, 300, 20))
				o.BackupRunning = true
				return o
			}(), Wait, etcdv1alpha1.ReasonWaitingForBackup, "", "c-a, c-b, c-c",
		},
		"a member down: no defragmentation": {
			defragSpec(), clusterAt("3.6.0", sized("c-a", 1, 300, 20), func() Member { m := sized("c-b", 2, 300, 20); m.Healthy = false; return m }(), sized("c-c", 3, 300, 20)), Wait, etcdv1alpha1.ReasonWaitingForMembers, "", "",
		},
		"a version step comes first": {
			func() Spec { s := defragSpec(); s.Version, s.Image = "3.6.15", "etcd:v3.6.15"; return s }(),
			clusterAt("3.6.0", sized("c-a", 1, 300, 20), sized("c-b", 2, 300, 20), sized("c-c", 3, 300, 20)), RollMember, etcdv1alpha1.ReasonDowngrading, "", "",
		},
		"NOSPACE without recovery: reported, nothing done": {
			defragSpec(), noSpace(5000, 0, sized("c-a", 1, 288, 288), sized("c-b", 2, 288, 288), sized("c-c", 3, 288, 288)), None, etcdv1alpha1.ReasonReconciled, "", "",
		},
		"NOSPACE: compact first, keeping the margin": {
			recoverySpec(), noSpace(5000, 0, sized("c-a", 1, 288, 288), sized("c-b", 2, 288, 288), sized("c-c", 3, 288, 288)), CompactForSpace, etcdv1alpha1.ReasonRecoveringFromNoSpace, "", "compacting revisions 1..4900",
		},
		"NOSPACE: the compacted revision not read yet: wait": {
			recoverySpec(), func() Observation {
				o := noSpace(5000, 0, sized("c-a", 1, 288, 288), sized("c-b", 2, 288, 288), sized("c-c", 3, 288, 288))
				o.CompactRevisionKnown = false
				return o
			}(), Wait, etcdv1alpha1.ReasonRecoveringFromNoSpace, "", "",
		},
		"NOSPACE: compacted, members defragmented followers first (below the usual thresholds too)": {
			recoverySpec(), noSpace(5000, 4900, sized("c-a", 1, 288, 20), sized("c-b", 2, 288, 20), sized("c-c", 3, 40, 20)), Defragment, etcdv1alpha1.ReasonRecoveringFromNoSpace, "c-b", "after the compaction",
		},
		"NOSPACE: compacted, data in use as before (etcd counts freed pages as used until its next write): every member defragmented once, followers first": {
			recoverySpec(), noSpace(5000, 4900, sized("c-a", 1, 280, 275), sized("c-b", 2, 280, 275), sized("c-c", 3, 280, 275)), Defragment, etcdv1alpha1.ReasonRecoveringFromNoSpace, "c-b", "not defragmented since the compaction to revision 4900",
		},
		"NOSPACE: a member defragmented before this compaction is defragmented again": {
			recoverySpec(), noSpace(5000, 4900, defragmentedAt(4900, sized("c-a", 1, 21, 20)), defragmentedAt(4900, sized("c-b", 2, 21, 20)), defragmentedAt(1200, sized("c-c", 3, 280, 275))), Defragment, etcdv1alpha1.ReasonRecoveringFromNoSpace, "c-c", "compaction to revision 4900",
		},
		"NOSPACE: the leader's turn once the followers are defragmented: leadership moves first": {
			recoverySpec(), noSpace(5000, 4900, sized("c-a", 1, 280, 275), defragmentedAt(4900, sized("c-b", 2, 21, 20)), defragmentedAt(4900, sized("c-c", 3, 21, 20))), MoveLeader, etcdv1alpha1.ReasonRecoveringFromNoSpace, "c-a", "",
		},
		"NOSPACE: members without a volume are judged by the free pages etcd reports": {
			recoverySpec(), noSpace(5000, 4900, ephemeral(sized("c-a", 1, 21, 20)), ephemeral(sized("c-b", 2, 21, 20)), ephemeral(sized("c-c", 3, 21, 20))), DisarmNoSpace, etcdv1alpha1.ReasonRecoveringFromNoSpace, "", "",
		},
		"NOSPACE: the leader last": {
			recoverySpec(), noSpace(5000, 4900, sized("c-a", 1, 288, 20), defragmentedAt(4900, sized("c-b", 2, 21, 20)), defragmentedAt(4900, sized("c-c", 3, 21, 20))), MoveLeader, etcdv1alpha1.ReasonRecoveringFromNoSpace, "c-a", "",
		},
		"NOSPACE: the leader last, after the followers have freed the compacted pages": {
			recoverySpec(), noSpace(5000, 4900, sized("c-a", 1, 288, 20), defragmentedAt(4900, sized("c-b", 2, 21, 20)), ephemeral(sized("c-c", 3, 288, 280))), Wait, etcdv1alpha1.ReasonRecoveringFromNoSpace, "", "c-c has 280.0 MiB in use",
		},
		"NOSPACE: defragmented and room again: disarm": {
			recoverySpec(), noSpace(5000, 4900, defragmentedAt(4900, sized("c-a", 1, 21, 20)), defragmentedAt(4900, sized("c-b", 2, 21, 20)), defragmentedAt(4900, sized("c-c", 3, 21, 20))), DisarmNoSpace, etcdv1alpha1.ReasonRecoveringFromNoSpace, "", "",
		},
		"NOSPACE: live data fills the quota: a human must act": {
			recoverySpec(), noSpace(5000, 4900, defragmentedAt(4900, sized("c-a", 1, 280, 275)), defragmentedAt(4900, sized("c-b", 2, 280, 275)), defragmentedAt(4900, sized("c-c", 3, 280, 275))), Wait, etcdv1alpha1.ReasonNoSpaceQuotaTooSmall, "", "raise spec.etcd.quotaBackendBytes",
		},
		"NOSPACE: live data fills the quota, a maximum allows more: the quota doubles": {
			raisingSpec(288, 1024), noSpace(5000, 4900, defragmentedAt(4900, sized("c-a", 1, 280, 275)), defragmentedAt(4900, sized("c-b", 2, 280, 275)), defragmentedAt(4900, sized("c-c", 3, 280, 275))), RaiseQuota, etcdv1alpha1.ReasonRaisingQuota, "", "raising the quota to 576.0 MiB",
		},
		"NOSPACE: more than twice when the data in use needs it, in whole MiB": {
			raisingSpec(32, 1024), noSpace(5000, 4900, defragmentedAt(4900, sized("c-a", 1, 61, 60)), defragmentedAt(4900, sized("c-b", 2, 61, 60)), defragmentedAt(4900, sized("c-c", 3, 61, 60))), RaiseQuota, etcdv1alpha1.ReasonRaisingQuota, "", "raising the quota to 67.0 MiB",
		},
		"NOSPACE: doubling is capped at the maximum": {
			raisingSpec(288, 400), noSpace(5000, 4900, defragmentedAt(4900, sized("c-a", 1, 280, 275)), defragmentedAt(4900, sized("c-b", 2, 280, 275)), defragmentedAt(4900, sized("c-c", 3, 280, 275))), RaiseQuota, etcdv1alpha1.ReasonRaisingQuota, "", "raising the quota to 400.0 MiB",
		},
		"NOSPACE: the quota is at the maximum: a human must act": {
			raisingSpec(400, 400), noSpace(5000, 4900, defragmentedAt(4900, sized("c-a", 1, 390, 385)), defragmentedAt(4900, sized("c-b", 2, 390, 385)), defragmentedAt(4900, sized("c-c", 3, 390, 385))), Wait, etcdv1alpha1.ReasonNoSpaceQuotaTooSmall, "", "",
		},
		"a raised quota: followers restart with it first": {
			raisingSpec(576, 1024), clusterAt("3.6.0", withQuota(sized("c-a", 1, 20, 20), 288), withQuota(sized("c-b", 2, 20, 20), 288), withQuota(sized("c-c", 3, 20, 20), 576)),
			RestartMember, etcdv1alpha1.ReasonRestartingForQuota, "c-b", "runs with a quota of 288.0 MiB, the quota in force is 576.0 MiB",
		},
		"a raised quota: the leader last, after handing over": {
			raisingSpec(576, 1024), clusterAt("3.6.0", withQuota(sized("c-a", 1, 20, 20), 288), withQuota(sized("c-b", 2, 20, 20), 576), withQuota(sized("c-c", 3, 20, 20), 576)),
			MoveLeader, etcdv1alpha1.ReasonMovingLeader, "c-a", "before restarting it",
		},
		"a restart for the quota comes before NOSPACE steps": {
			raisingSpec(576, 1024), noSpace(5000, 4900, withQuota(sized("c-a", 1, 280, 275), 576), withQuota(sized("c-b", 2, 280, 275), 288), withQuota(sized("c-c", 3, 280, 275), 576)),
			RestartMember, etcdv1alpha1.ReasonRestartingForQuota, "c-b", "",
		},
		"Pods that set no quota (before Steward set one) are left alone": {
			raisingSpec(576, 1024), clusterAt("3.6.0", sized("c-a", 1, 20, 20), sized("c-b", 2, 20, 20), sized("c-c", 3, 20, 20)), None, etcdv1alpha1.ReasonReconciled, "", "",
		},
		"ephemeral members are never restarted for a quota": {
			func() Spec { s := raisingSpec(576, 1024); s.Storage.Size = 0; return s }(),
			clusterAt("3.6.0", withQuota(sized("c-a", 1, 20, 20), 288), withQuota(sized("c-b", 2, 20, 20), 288), withQuota(sized("c-c", 3, 20, 20), 288)), None, etcdv1alpha1.ReasonReconciled, "", "",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := Next(tt.spec, tt.obs)
			if got.Kind != tt.want || got.Reason != tt.reason {
				t.Fatalf("Next = %s/%s (%s), want %s/%s", got.Kind, got.Reason, got.Message, tt.want, tt.reason)
			}
			if tt.member != "" && (len(got.Members) == 0 || got.Members[0] != tt.member) {
				t.Errorf("members %v, want %s", got.Members, tt.member)
			}
			if !strings.Contains(got.Message, tt.msg) {
				t.Errorf("message %q does not say %q", got.Message, tt.msg)
			}
			if got.Kind == MoveLeader && got.TargetID == tt.obs.LeaderID {
				t.Errorf("leadership moved to the leader itself")
			}
		})
	}
}

// replayDefragmentation runs the planner pass by pass on obs, a second apart, applying each defragmentation (the
// file shrinks to its data in use, and the volume records it) and leadership move to it, and lets between change
// it after each pass; it returns the steps.
func replayDefragmentation(t *testing.T, obs Observation, between func(*Observation)) string {
	t.Helper()
	var steps []string
	for pass := 0; pass < 20; pass++ {
		for i := range obs.Members {
			if obs.Members[i].DefragmentRecorded {
				obs.Members[i].DefragmentedAgo += time.Second
			}
		}
		a := Next(defragSpec(), obs)
		switch a.Kind {
		case None:
			return strings.Join(steps, ", ")
		case Wait:
			steps = append(steps, "wait")
		case Defragment:
			steps = append(steps, "defrag "+a.Members[0])
			for i := range obs.Members {
				if obs.Members[i].Name == a.Members[0] {
					obs.Members[i].DBSize = obs.Members[i].DBSizeInUse
					obs.Members[i].DefragmentedAgo, obs.Members[i].DefragmentRecorded = 0, true
				}
			}
		case MoveLeader:
			steps = append(steps, "move "+a.Members[0]+"->"+a.Members[1])
			obs.LeaderID = a.TargetID
		default:
			t.Fatalf("pass %d: %s (%s)", pass, a.Kind, a.Message)
		}
		if between != nil {
			between(&obs)
		}
	}
	return strings.Join(steps, ", ")
}

// TestDefragmentationSequence replays a threshold defragmentation of three fragmented members: each member once,
// the leader last after leadership moved, never two at a time (one step per pass by construction).
func TestDefragmentationSequence(t *testing.T) {
	obs := clusterAt("3.6.0", sized("c-a", 1, 300, 20), sized("c-b", 2, 300, 20), sized("c-c", 3, 300, 20))
	if got, want := replayDefragmentation(t, obs, nil), "defrag c-b, defrag c-c, move c-a->c-b, defrag c-a"; got != want {
		t.Fatalf("steps %s, want %s", got, want)
	}
}

// TestDefragmentationAfterCompactionLag replays the defragmentation after a compaction the leader applies first:
// the followers free the compacted pages one pass after another. Leadership still moves once, the leader last.
func TestDefragmentationAfterCompactionLag(t *testing.T) {
	obs := clusterAt("3.6.0", sized("c-a", 1, 300, 20), sized("c-b", 2, 300, 290), sized("c-c", 3, 300, 290))
	oneFollowerCompacts := func(obs *Observation) {
		for i := range obs.Members {
			if obs.Members[i].DBSizeInUse == 290*mib {
				obs.Members[i].DBSizeInUse = 20 * mib
				return
			}
		}
	}
	if got, want := replayDefragmentation(t, obs, oneFollowerCompacts), "wait, defrag c-b, defrag c-c, move c-a->c-b, defrag c-a"; got != want {
		t.Fatalf("steps %s, want %s", got, want)
	}
}

// TestDefragmentationDuringALargeCompaction replays a threshold defragmentation while a large compaction is still
// freeing pages in batches (a 4.6 GB database compacted to 40 MB): every member keeps getting emptier pass after
// pass. Each member is defragmented once, the leader last, and none again within DefragRest; without the rest the
// first member was defragmented again on every pass while the others waited.
func TestDefragmentationDuringALargeCompaction(t *testing.T) {
	obs := clusterAt("3.6.0", sized("c-a", 1, 4600, 1200), sized("c-b", 2, 4600, 1200), sized("c-c", 3, 4600, 1200))
	compactionGoesOn := func(obs *Observation) {
		for i := range obs.Members {
			if in := obs.Members[i].DBSizeInUse; in > 40*mib {
				obs.Members[i].DBSizeInUse = max(40*mib, in-150*mib)
			}
		}
	}
	if got, want := replayDefragmentation(t, obs, compactionGoesOn), "defrag c-b, defrag c-c, move c-a->c-b, defrag c-a"; got != want {
		t.Fatalf("steps %s, want %s", got, want)
	}
	// Past the rest, a member the compaction left fragmented again is due again.
	again := clusterAt("3.6.0", sized("c-a", 1, 300, 40), sized("c-b", 2, 40, 40), sized("c-c", 3, 40, 40))
	again.LeaderID = 2
	again.Members[0].DefragmentRecorded = true
	for _, tc := range []struct {
		ago  time.Duration
		want ActionKind
	}{{DefragRest - time.Second, None}, {DefragRest, Defragment}} {
		again.Members[0].DefragmentedAgo = tc.ago
		if a := Next(defragSpec(), again); a.Kind != tc.want {
			t.Errorf("defragmented %s ago, fragmented again: %s (%s), want %s", tc.ago, a.Kind, a.Message, tc.want)
		}
	}
}

// TestNoSpaceRecoveryWithStaleDataInUse replays a NOSPACE recovery in which etcd goes on reporting the data in
// use as it was before the compaction: it counts the freed pages as used until its backend commits a write, and
// NOSPACE refuses writes. Every member is still defragmented once (recording the compaction it followed), the
// leader last, and the alarm disarmed; no pass judges the quota too small on the stale numbers.
func TestNoSpaceRecoveryWithStaleDataInUse(t *testing.T) {
	obs := noSpace(5000, 0, sized("c-a", 1, 288, 280), sized("c-b", 2, 288, 280), sized("c-c", 3, 288, 280))
	var steps []string
	for pass := 0; pass < 20; pass++ {
		a := Next(recoverySpec(), obs)
		switch a.Kind {
		case DisarmNoSpace:
			steps = append(steps, "disarm")
			if got, want := strings.Join(steps, ", "), "compact 4900, defrag c-b, defrag c-c, move c-a->c-b, defrag c-a, disarm"; got != want {
				t.Fatalf("steps %s, want %s", got, want)
			}
			return
		case CompactForSpace:
			steps = append(steps, fmt.Sprintf("compact %d", a.Revision))
			obs.CompactRevision = a.Revision // the data in use etcd reports stays as it was
		case Defragment:
			if a.Revision != obs.CompactRevision {
				t.Fatalf("pass %d: defragmentation of %s records compaction %d, want %d", pass, a.Members[0], a.Revision, obs.CompactRevision)
			}
			steps = append(steps, "defrag "+a.Members[0])
			for i := range obs.Members {
				if obs.Members[i].Name == a.Members[0] {
					obs.Members[i].DBSize, obs.Members[i].DBSizeInUse, obs.Members[i].DefragmentedAtCompaction = 20*mib, 20*mib, a.Revision
				}
			}
		case MoveLeader:
			steps = append(steps, "move "+a.Members[0]+"->"+a.Members[1])
			obs.LeaderID = a.TargetID
		default:
			t.Fatalf("pass %d after %v: %s/%s (%s)", pass, steps, a.Kind, a.Reason, a.Message)
		}
	}
	t.Fatalf("no disarm after 20 passes: %v", steps)
}
