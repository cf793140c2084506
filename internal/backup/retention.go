package backup

import (
	"sort"
	"time"
)

// State of a backup as retention sees it.
type State int

// Backup states.
const (
	Running State = iota
	Succeeded
	Failed
)

// Item is one backup of a schedule.
type Item struct {
	Name string
	// Created orders backups; Finished is when a finished backup completed or failed.
	Created, Finished time.Time
	State             State
	// InUse: a restore is reading the backup's snapshot (HeldBy); retention leaves it until the restore ends.
	InUse bool
}

// RestoreUse is one EtcdRestore as the hold on the backup it reads sees it.
type RestoreUse struct {
	Name, Backup string
	// Ended: the restore is Complete or Failed, or being deleted (or gone, when it is not listed at all).
	Ended bool
}

// HeldBy names the restores that hold backup, sorted: those reading it that have not ended. The snapshot of a
// held backup is neither retired by retention nor deleted with its EtcdBackup while a restore may still read it
// (to verify it, or from a member's init container); the hold ends with the last restore, however it ends.
func HeldBy(backup string, uses []RestoreUse) []string {
	var out []string
	for _, u := range uses {
		if u.Backup == backup && !u.Ended {
			out = append(out, u.Name)
		}
	}
	sort.Strings(out)
	return out
}

// Retention limits a schedule's backups. Zero values mean no limit of that kind.
type Retention struct {
	// MaxCount successful backups are kept (the newest ones).
	MaxCount int
	// MaxAge: successful backups that finished longer ago than this are retired.
	MaxAge time.Duration
	// FailedLimit failed backups are kept (the newest ones); a failed backup has no data.
	FailedLimit int
}

// Prune returns the names of the backups retention retires at now, oldest first.
//
// Invariants: a running backup is never retired (its data is not committed yet), nor one in use by a restore
// (it goes at a later pass, once the restore ended), and the newest successful backup is always kept, whatever
// its age, so that a schedule that stopped producing backups (cluster down, destination full) never prunes
// itself down to nothing.
func Prune(items []Item, now time.Time, r Retention) []string {
	var ok, failed []Item
	for _, it := range items {
		switch it.State {
		case Succeeded:
			ok = append(ok, it)
		case Failed:
			failed = append(failed, it)
		}
	}
	newestFirst := func(list []Item) {
		sort.SliceStable(list, func(i, j int) bool {
			if !list[i].Created.Equal(list[j].Created) {
				return list[i].Created.After(list[j].Created)
			}
			return list[i].Name > list[j].Name
		})
	}
	newestFirst(ok)
	newestFirst(failed)
	var out []Item
	for i, it := range ok {
		if i == 0 {
			continue // the newest successful backup is always kept
		}
		tooMany := r.MaxCount > 0 && i >= r.MaxCount
		tooOld := r.MaxAge > 0 && now.Sub(it.Finished) > r.MaxAge
		if (tooMany || tooOld) && !it.InUse {
			out = append(out, it)
		}
	}
	for i, it := range failed {
		if i >= r.FailedLimit && !it.InUse {
			out = append(out, it)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.Before(out[j].Created)
		}
		return out[i].Name < out[j].Name
	})
	names := make([]string, 0, len(out))
	for _, it := range out {
		names = append(names, it.Name)
	}
	return names
}
