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
// Invariants: a running backup is never retired (its data is not committed yet), and the newest successful
// backup is always kept, whatever its age, so that a schedule that stopped producing backups (cluster down,
// destination full) never prunes itself down to nothing.
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
		if tooMany || tooOld {
			out = append(out, it)
		}
	}
	for i, it := range failed {
		if i >= r.FailedLimit {
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
