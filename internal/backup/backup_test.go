package backup

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestNames(t *testing.T) {
	if got := ArtifactName("prod", t0.In(time.FixedZone("x", 3600))); got != "prod-20260102T030405Z.db" {
		t.Errorf("ArtifactName = %s", got)
	}
	for name, want := range map[string]bool{"prod-20260102T030405Z.db": true, "backups/prod-20260102T030405Z.db": true,
		"prod-x-20260102T030405Z.db": false, "prod-20260102T030405Z.db.partial-1": false, ".prod-20260102T030405Z.db.partial-1": false,
		"prod-at-1403.db": false, "staging-20260102T030405Z.db": false} {
		if at, ok := ParseArtifactName("prod", name); ok != want || ok && !at.Equal(t0) {
			t.Errorf("ParseArtifactName(prod, %s) = %s, %v", name, at, ok)
		}
	}
	for prefix, want := range map[string]string{"": "f.db", "a": "a/f.db", "a/": "a/f.db", "a/b//": "a/b/f.db"} {
		if got := JoinPrefix(prefix, "f.db"); got != want {
			t.Errorf("JoinPrefix(%q) = %s, want %s", prefix, got, want)
		}
	}
	if got := ScheduledBackupName("nightly", t0); got != "nightly-20260102t030405z" {
		t.Errorf("ScheduledBackupName = %s", got)
	}
	long := ScheduledBackupName(strings.Repeat("a", 40)+"-"+strings.Repeat("b", 40), t0)
	if len(long) > 63 || !strings.HasSuffix(long, "-20260102t030405z") || strings.Contains(long, "--") {
		t.Errorf("long name %s (%d)", long, len(long))
	}
	if got := TempName("dir/sub/f.db", "n1"); got != "dir/sub/.f.db.partial-n1" {
		t.Errorf("TempName = %s", got)
	}
}

func TestPrune(t *testing.T) {
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	ok := func(name string, min int) Item {
		return Item{Name: name, Created: at(min), Finished: at(min).Add(30 * time.Second), State: Succeeded}
	}
	failed := func(name string, min int) Item {
		return Item{Name: name, Created: at(min), Finished: at(min), State: Failed}
	}
	running := func(name string, min int) Item { return Item{Name: name, Created: at(min), State: Running} }
	inUse := func(it Item) Item { it.InUse = true; return it }
	for name, tc := range map[string]struct {
		items []Item
		now   time.Time
		r     Retention
		want  []string
	}{
		"nothing to prune":       {items: []Item{ok("a", 0), ok("b", 1)}, now: at(2), r: Retention{MaxCount: 2}, want: []string{}},
		"count keeps the newest": {items: []Item{ok("c", 2), ok("a", 0), ok("b", 1), ok("d", 3)}, now: at(4), r: Retention{MaxCount: 2}, want: []string{"a", "b"}},
		"running never pruned":   {items: []Item{running("a", 0), ok("b", 1), ok("c", 2)}, now: at(3), r: Retention{MaxCount: 1}, want: []string{"b"}},
		"age":                    {items: []Item{ok("a", 0), ok("b", 10), ok("c", 20)}, now: at(21), r: Retention{MaxCount: 10, MaxAge: 12 * time.Minute}, want: []string{"a"}},
		"newest kept whatever its age": {items: []Item{ok("a", 0), ok("b", 1)}, now: at(1000), r: Retention{MaxAge: time.Minute},
			want: []string{"a"}},
		"failed by their own limit": {items: []Item{failed("f1", 0), failed("f2", 1), failed("f3", 2), ok("a", 3)}, now: at(4),
			r: Retention{MaxCount: 1, FailedLimit: 1}, want: []string{"f1", "f2"}},
		"failed limit zero": {items: []Item{failed("f1", 0)}, now: at(4), r: Retention{MaxCount: 1}, want: []string{"f1"}},
		"ties by name":      {items: []Item{ok("b", 0), ok("a", 0), ok("c", 0)}, now: at(1), r: Retention{MaxCount: 1}, want: []string{"a", "b"}},
		"in use by a restore: kept past its count": {items: []Item{inUse(ok("a", 0)), ok("b", 1), ok("c", 2)}, now: at(3), r: Retention{MaxCount: 1},
			want: []string{"b"}},
		"in use by a restore: kept past its age": {items: []Item{inUse(ok("a", 0)), ok("b", 10), ok("c", 20)}, now: at(21), r: Retention{MaxCount: 10, MaxAge: 12 * time.Minute},
			want: []string{}},
		"in use, failed: kept past the failed limit": {items: []Item{inUse(failed("f1", 0)), failed("f2", 1), ok("a", 2)}, now: at(3), r: Retention{MaxCount: 1},
			want: []string{"f2"}},
	} {
		t.Run(name, func(t *testing.T) {
			got := Prune(tc.items, tc.now, tc.r)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Prune = %v, want %v", got, tc.want)
			}
		})
	}
}

// FuzzPrune checks retention's invariants on arbitrary histories: the newest successful backup and every
// running backup survive, and at most MaxCount successful backups remain.
func FuzzPrune(f *testing.F) {
	f.Add([]byte{1, 2, 0, 1, 1, 2, 3}, uint8(2), uint8(5))
	f.Fuzz(func(t *testing.T, states []byte, maxCount, maxAgeMin uint8) {
		var items []Item
		newestOK := -1
		for i, s := range states {
			it := Item{Name: string(rune('a'+i%26)) + strings.Repeat("x", i/26), Created: t0.Add(time.Duration(i) * time.Minute),
				Finished: t0.Add(time.Duration(i)*time.Minute + time.Second), State: State(s % 3)}
			if it.State == Succeeded {
				newestOK = i
			}
			items = append(items, it)
		}
		r := Retention{MaxCount: int(maxCount), MaxAge: time.Duration(maxAgeMin) * time.Minute, FailedLimit: 1}
		gone := map[string]bool{}
		for _, n := range Prune(items, t0.Add(time.Duration(len(states))*time.Minute), r) {
			gone[n] = true
		}
		kept := 0
		for i, it := range items {
			if it.State == Running && gone[it.Name] {
				t.Fatalf("pruned running backup %s", it.Name)
			}
			if i == newestOK && gone[it.Name] {
				t.Fatalf("pruned the newest successful backup %s", it.Name)
			}
			if it.State == Succeeded && !gone[it.Name] {
				kept++
			}
		}
		if r.MaxCount > 0 && kept > r.MaxCount && kept > 1 {
			t.Fatalf("kept %d successful backups, max %d", kept, r.MaxCount)
		}
	})
}

func TestSchedule(t *testing.T) {
	for _, bad := range []string{"", "* * * *", "61 * * * *", "@sometimes", "CRON_TZ=Europe/Berlin * * * * *", "TZ=UTC * * * * *"} {
		if _, err := ParseSchedule(bad); err == nil {
			t.Errorf("ParseSchedule(%q) accepted", bad)
		}
	}
	s, err := ParseSchedule("*/15 * * * *")
	if err != nil {
		t.Fatal(err)
	}
	last := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	due, ok, next := s.Due(last, last.Add(10*time.Minute))
	if ok || !next.Equal(last.Add(15*time.Minute)) {
		t.Errorf("not yet due: got %v %v %v", due, ok, next)
	}
	// Three times missed: only the most recent is due; the next is after now.
	due, ok, next = s.Due(last, last.Add(50*time.Minute))
	if !ok || !due.Equal(last.Add(45*time.Minute)) || !next.Equal(last.Add(60*time.Minute)) {
		t.Errorf("missed: got %v %v %v", due, ok, next)
	}
	e, err := ParseSchedule("@every 20s")
	if err != nil {
		t.Fatal(err)
	}
	if due, ok, _ := e.Due(last, last.Add(20*time.Second)); !ok || !due.Equal(last.Add(20*time.Second)) {
		t.Errorf("@every 20s: %v %v", due, ok)
	}
}

// FuzzParseSchedule: parsing never panics, and an accepted schedule has a next time after any instant that is
// in the future (or none, for an impossible date like Feb 30).
func FuzzParseSchedule(f *testing.F) {
	for _, s := range []string{"*/1 * * * *", "0 3 * * 1-5", "@hourly", "@every 1h30m", "0 0 30 2 *", "a b c d e", "* * * * * *"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		s, err := ParseSchedule(expr)
		if err != nil {
			return
		}
		now := t0
		if n := s.Next(now); !n.IsZero() && !n.After(now) {
			t.Fatalf("%q: next %v not after %v", expr, n, now)
		}
		due, ok, next := s.Due(now.Add(-time.Hour), now)
		if ok && (due.After(now) || !next.IsZero() && !next.After(now)) {
			t.Fatalf("%q: due %v next %v around %v", expr, due, next, now)
		}
	})
}

func TestResultRoundTrip(t *testing.T) {
	ok := Result{Succeeded: true, Member: "m", Location: "s3://b/k", SizeBytes: 24608, SHA256: strings.Repeat("ab", 32), Revision: 51,
		EtcdVersion: "3.6.16", ClusterID: "babc9795b64f03e3"}
	got, err := ParseResult(string(Encode(ok)))
	if err != nil || got != ok {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	full := Result{Reason: etcdv1alpha1.ReasonDestinationFull, Message: "no space left on device", Space: Space{Available: 4096, Capacity: 8 << 20}}
	if got, err := ParseResult(string(Encode(full))); err != nil || got != full {
		t.Fatalf("round trip of a full claim: %+v %v", got, err)
	}
	if strings.Contains(string(Encode(ok)), "space") {
		t.Errorf("a result without a measured volume encodes a space: %s", Encode(ok))
	}
	long := Result{Reason: etcdv1alpha1.ReasonSnapshotFailed, Message: strings.Repeat("é", 5000)}
	b := Encode(long)
	if len(b) > MaxResultBytes {
		t.Fatalf("encoded %d bytes", len(b))
	}
	if got, err := ParseResult(string(b)); err != nil || got.Reason != etcdv1alpha1.ReasonSnapshotFailed {
		t.Fatalf("long failure: %+v %v", got, err)
	}
	for name, msg := range map[string]string{
		"empty":              "",
		"not json":           "panic: runtime error",
		"success no sha":     `{"succeeded":true,"location":"x","sizeBytes":1}`,
		"success bad sha":    `{"succeeded":true,"location":"x","sizeBytes":1,"sha256":"` + strings.Repeat("z", 64) + `"}`,
		"failure no reason":  `{"succeeded":false}`,
		"unknown field":      `{"succeeded":false,"reason":"X","password":"p"}`,
		"trailing":           `{"succeeded":false,"reason":"X"} {}`,
		"more free than all": `{"succeeded":false,"reason":"X","space":{"available":2,"capacity":1}}`,
		"no capacity":        `{"succeeded":false,"reason":"X","space":{"available":0,"capacity":0,"x":1}}`,
		"negative free":      `{"succeeded":false,"reason":"X","space":{"available":-1,"capacity":10}}`,
	} {
		if _, err := ParseResult(msg); err == nil {
			t.Errorf("%s: accepted %q", name, msg)
		}
	}
	if _, err := ParseResult(""); !errors.Is(err, ErrNoResult) {
		t.Errorf("empty: %v", err)
	}
}

// FuzzParseResult: never panics; whatever it accepts survives Encode and parses again to the same value, and a
// success always carries a location, a size and a sha256.
func FuzzParseResult(f *testing.F) {
	f.Add(`{"succeeded":true,"location":"pvc://c/p","sizeBytes":4128,"sha256":"` + strings.Repeat("0", 64) + `","revision":3}`)
	f.Add(`{"succeeded":false,"reason":"SnapshotFailed","message":"no member"}`)
	f.Add(`{}`)
	f.Fuzz(func(t *testing.T, msg string) {
		r, err := ParseResult(msg)
		if err != nil {
			return
		}
		if r.Succeeded && (r.Location == "" || r.SizeBytes <= 0 || len(r.SHA256) != 64) {
			t.Fatalf("accepted an incomplete success: %+v", r)
		}
		again, err := ParseResult(string(Encode(r)))
		if err != nil {
			t.Fatalf("re-parse of %+v: %v", r, err)
		}
		if len(r.Message) < 1000 && again != r {
			t.Fatalf("round trip changed %+v to %+v", r, again)
		}
	})
}

// snapshotBytes is a fake snapshot: n bytes of "database" (a multiple of 512) and etcd's sha256 of them.
func snapshotBytes(n int) []byte {
	db := bytes.Repeat([]byte("0123456789abcdef"), n/16)
	sum := sha256.Sum256(db)
	return append(db, sum[:]...)
}

func TestVerifier(t *testing.T) {
	good := snapshotBytes(8192)
	for name, r := range map[string]io.Reader{
		"whole":     bytes.NewReader(good),
		"one byte":  iotest.OneByteReader(bytes.NewReader(good)),
		"half":      iotest.HalfReader(bytes.NewReader(good)),
		"data+eof":  iotest.DataErrReader(bytes.NewReader(good)),
		"33 chunks": &chunked{data: good, n: 33},
	} {
		v := NewVerifier(r)
		out, err := io.ReadAll(v)
		if err != nil || !bytes.Equal(out, good) || !v.Verified() || v.Size() != int64(len(good)) {
			t.Errorf("%s: err %v, verified %v, %d bytes", name, err, v.Verified(), v.Size())
		}
		sum := sha256.Sum256(good)
		if v.SHA256() != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: sha256 of the whole file wrong", name)
		}
	}
	bad := append([]byte(nil), good...)
	bad[100] ^= 1
	truncated := good[:4096+32]
	for name, data := range map[string][]byte{"flipped bit": bad, "truncated": truncated, "no checksum": good[:8192], "empty": nil} {
		v := NewVerifier(bytes.NewReader(data))
		if _, err := io.ReadAll(v); !errors.Is(err, ErrChecksumMismatch) || v.Verified() || !v.Mismatch() {
			t.Errorf("%s: err %v, verified %v", name, err, v.Verified())
		}
	}
	// A source error is passed on, not mistaken for a mismatch.
	v := NewVerifier(io.MultiReader(bytes.NewReader(good[:1000]), iotest.ErrReader(io.ErrUnexpectedEOF)))
	if _, err := io.ReadAll(v); !errors.Is(err, io.ErrUnexpectedEOF) || v.Mismatch() {
		t.Errorf("source error: %v", err)
	}
}

type chunked struct {
	data []byte
	n    int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	k := min(c.n, len(p), len(c.data))
	copy(p, c.data[:k])
	c.data = c.data[k:]
	return k, nil
}

func TestDecide(t *testing.T) {
	m := func(name string, healthy, leader, learner bool) Member {
		return Member{Name: name, ClientURL: "http://" + name + ":2379", Healthy: healthy, Leader: leader, Learner: learner}
	}
	for name, tc := range map[string]struct {
		in   AdmitInput
		want Decision
	}{
		"no cluster": {in: AdmitInput{}, want: Decision{Verdict: Refuse, Reason: etcdv1alpha1.ReasonClusterNotFound, Message: "the EtcdCluster does not exist"}},
		"a hibernated cluster: refused at once, not waited for": {in: AdmitInput{ClusterFound: true, Hibernated: "db", Age: time.Second},
			want: Decision{Verdict: Refuse, Reason: etcdv1alpha1.ReasonHibernated, Message: "EtcdCluster db is hibernated: no member runs to take a snapshot from; " +
				"resume it (spec.hibernation.enabled: false) and create the backup again"}},
		"no destination": {in: AdmitInput{ClusterFound: true, DestinationProblem: "PersistentVolumeClaim x does not exist"},
			want: Decision{Verdict: Refuse, Reason: etcdv1alpha1.ReasonDestinationNotFound, Message: "PersistentVolumeClaim x does not exist"}},
		"no usable encryption key: refused before a byte is written": {
			in:   AdmitInput{ClusterFound: true, Members: []Member{m("a", true, true, false)}, KeyProblem: "encryption key Secret k does not exist"},
			want: Decision{Verdict: Refuse, Reason: etcdv1alpha1.ReasonEncryptionKeyNotFound, Message: "encryption key Secret k does not exist; nothing was written"}},
		"followers first, leader last, no learner, no unhealthy": {
			in: AdmitInput{ClusterFound: true, Members: []Member{m("a", true, true, false), m("b", true, false, false), m("c", false, false, false),
				m("d", true, false, true), m("e", true, false, false)}},
			want: Decision{Verdict: Admit, Members: []string{"b=http://b:2379", "e=http://e:2379", "a=http://a:2379"}}},
		"unavailable, young": {in: AdmitInput{ClusterFound: true, Members: []Member{m("a", false, false, false)}, Age: 10 * time.Second},
			want: Decision{Verdict: Wait, Reason: etcdv1alpha1.ReasonClusterUnavailable, Message: "no healthy voting member among 1 members; waiting for one"}},
		"unavailable, old": {in: AdmitInput{ClusterFound: true, Age: 2 * time.Minute},
			want: Decision{Verdict: Refuse, Reason: etcdv1alpha1.ReasonClusterUnavailable, Message: "no healthy voting member among 0 members for 1m0s"}},
	} {
		t.Run(name, func(t *testing.T) {
			if got := Decide(tc.in); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Decide = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestHeldBy(t *testing.T) {
	uses := []RestoreUse{
		{Name: "r2", Backup: "b1"},
		{Name: "r1", Backup: "b1"},
		{Name: "done", Backup: "b1", Ended: true},
		{Name: "other", Backup: "b2"},
	}
	for backup, want := range map[string][]string{"b1": {"r1", "r2"}, "b2": {"other"}, "b3": nil} {
		if got := HeldBy(backup, uses); !reflect.DeepEqual(got, want) {
			t.Errorf("HeldBy(%s) = %v, want %v", backup, got, want)
		}
	}
}
