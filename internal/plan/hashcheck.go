package plan

import (
	"fmt"
	"sort"
	"strings"
)

// Results of a comparison of members' key-space hashes (status.hashCheck.result).
const (
	// HashConsistent: every member compared had the same hash.
	HashConsistent = "Consistent"
	// HashMismatch: some members' hashes differ from the one a majority of the members compared agrees on.
	HashMismatch = "Mismatch"
	// HashNoMajority: members' hashes differ and no majority agrees on one: Steward cannot tell which data is
	// right.
	HashNoMajority = "NoMajority"
	// HashInconclusive: the members could not be compared (one did not answer, or a compaction came in between);
	// tried again soon.
	HashInconclusive = "Inconclusive"
)

// MemberHash is one member's hash of its key space at a check's revision, or why it has none.
type MemberHash struct {
	Name            string
	Hash            uint32
	CompactRevision int64
	Err             string
}

// HashVerdict is what a comparison of members' hashes found.
type HashVerdict struct {
	Result string
	// Mismatched are the members whose hash differs from the majority's (HashMismatch), or every member
	// compared (HashNoMajority).
	Mismatched []string
	Message    string
}

// CompareHashes compares the hashes members gave of their key space at revision rev. Hashes only compare
// between members compacted to the same revision (etcd hashes from the compacted revision up), so a compaction
// between two answers makes the comparison inconclusive, as does a member that did not answer. Which data is
// right is decided by majority, as etcd's own checks do: a member whose hash differs from the one more than half
// of the members compared agree on is the one that diverged.
func CompareHashes(rev int64, hashes []MemberHash) HashVerdict {
	hashes = append([]MemberHash(nil), hashes...)
	sort.Slice(hashes, func(i, j int) bool { return hashes[i].Name < hashes[j].Name })
	var failed []string
	for _, h := range hashes {
		if h.Err != "" {
			failed = append(failed, fmt.Sprintf("%s: %s", h.Name, h.Err))
		}
	}
	if len(failed) > 0 {
		return HashVerdict{Result: HashInconclusive, Message: fmt.Sprintf("no hash at revision %d from %s", rev, strings.Join(failed, "; "))}
	}
	if len(hashes) < 2 {
		return HashVerdict{Result: HashConsistent, Message: fmt.Sprintf("%d member: nothing to compare at revision %d", len(hashes), rev)}
	}
	compacted := map[int64]bool{}
	for _, h := range hashes {
		compacted[h.CompactRevision] = true
	}
	if len(compacted) > 1 {
		return HashVerdict{Result: HashInconclusive,
			Message: "members answered for different compacted revisions (a compaction came in between); comparing again at the next check"}
	}
	byHash := map[uint32][]string{}
	for _, h := range hashes {
		byHash[h.Hash] = append(byHash[h.Hash], h.Name)
	}
	if len(byHash) == 1 {
		return HashVerdict{Result: HashConsistent,
			Message: fmt.Sprintf("%d members have the same hash of their key space at revision %d (compacted at %d)", len(hashes), rev, hashes[0].CompactRevision)}
	}
	var groups []string
	var majority uint32
	found := false
	for hash, names := range byHash {
		groups = append(groups, fmt.Sprintf("%s have %08x", strings.Join(names, ", "), hash))
		if 2*len(names) > len(hashes) {
			majority, found = hash, true
		}
	}
	sort.Strings(groups)
	if !found {
		var all []string
		for _, h := range hashes {
			all = append(all, h.Name)
		}
		return HashVerdict{Result: HashNoMajority, Mismatched: all,
			Message: fmt.Sprintf("members' key spaces differ at revision %d and no majority agrees (%s): Steward cannot tell which data is right and replaces none; "+
				"compare the members' data (etcdctl endpoint hashkv --cluster), then restore from a backup or replace the wrong members by hand", rev, strings.Join(groups, "; "))}
	}
	var mismatched []string
	for _, h := range hashes {
		if h.Hash != majority {
			mismatched = append(mismatched, h.Name)
		}
	}
	return HashVerdict{Result: HashMismatch, Mismatched: mismatched,
		Message: fmt.Sprintf("the key space of members %s differs from the majority's at revision %d (%s)", strings.Join(mismatched, ", "), rev, strings.Join(groups, "; "))}
}
