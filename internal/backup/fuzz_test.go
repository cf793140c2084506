package backup

import (
	"bytes"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// FuzzCheckRelativePath: every path the agent accepts stays inside the destination volume, and so does the
// temporary file it writes first; paths with a ".." element or an absolute path are always refused.
func FuzzCheckRelativePath(f *testing.F) {
	for _, s := range []string{"backups/etcd-1.db", "../x", "a/../../x", "/etc/passwd", "a/..", "..", ".", "a//b", "a/./b", "...", "a/b/", "a\x00b", "é.db"} {
		f.Add(s)
	}
	const root = "/backup"
	f.Fuzz(func(t *testing.T, p string) {
		err := CheckRelativePath(p)
		escapes := strings.HasPrefix(p, "/") || p == ".." || strings.HasPrefix(p, "../") || strings.HasSuffix(p, "/..") || strings.Contains(p, "/../")
		if escapes && err == nil {
			t.Fatalf("accepted %q", p)
		}
		if err != nil {
			return
		}
		for _, file := range []string{filepath.Join(root, filepath.FromSlash(p)), filepath.Join(root, filepath.FromSlash(TempName(p, "n1")))} {
			if file != root && !strings.HasPrefix(file, root+"/") {
				t.Fatalf("%q resolves to %s, outside %s", p, file, root)
			}
		}
	})
}

// FuzzNames: backup names and keys derived from user input keep their promises for any input: a scheduled
// backup's name fits a label value and ends with its time; JoinPrefix puts the name under the prefix; TempName
// stays in the target's directory and differs from the target.
func FuzzNames(f *testing.F) {
	for _, s := range []string{"nightly", strings.Repeat("a", 80), "a.b-c", "prefix/", "a//b/", ""} {
		f.Add(s, "db-20260102T030405Z.db", int64(1767323045))
	}
	f.Fuzz(func(t *testing.T, s, name string, unix int64) {
		at := time.Unix(unix%(1<<34), 0)
		n := ScheduledBackupName(s, at)
		suffix := "-" + strings.ToLower(at.UTC().Format(TimeFormat))
		if !strings.HasSuffix(n, suffix) || (len(s)+len(suffix) > 63 && len(n) > 63) {
			t.Fatalf("ScheduledBackupName(%q) = %q", s, n)
		}
		if len(s)+len(suffix) <= 63 && n != s+suffix {
			t.Fatalf("ScheduledBackupName(%q) = %q cut a name that fits", s, n)
		}
		if name == "" || strings.Contains(name, "/") {
			return
		}
		j := JoinPrefix(s, name)
		if j != name && !strings.HasSuffix(j, "/"+name) || strings.HasPrefix(j, "/") && !strings.HasPrefix(s, "/") {
			t.Fatalf("JoinPrefix(%q, %q) = %q", s, name, j)
		}
		tmp := TempName(j, "n1")
		if tmp == j || path.Dir(tmp) != path.Dir(j) || !strings.HasPrefix(path.Base(tmp), ".") {
			t.Fatalf("TempName(%q) = %q", j, tmp)
		}
	})
}

// FuzzDecide: admission picks only healthy voting members with an address, every such member, followers before
// the leader, and admits exactly when there is one.
func FuzzDecide(f *testing.F) {
	f.Add([]byte{7, 1, 3, 0, 5}, true, "", int64(0))
	f.Add([]byte{}, true, "", int64(120))
	f.Add([]byte{2}, false, "missing PVC", int64(0))
	f.Fuzz(func(t *testing.T, flags []byte, found bool, problem string, ageSeconds int64) {
		var members []Member
		usable := map[string]bool{}
		for i, b := range flags {
			m := Member{Name: fmt.Sprintf("m%d", i), Healthy: b&1 != 0, Leader: b&2 != 0, Learner: b&4 != 0}
			if b&8 == 0 {
				m.ClientURL = "http://" + m.Name + ":2379"
			}
			members = append(members, m)
			if m.Healthy && !m.Learner && m.ClientURL != "" {
				usable[m.Name+"="+m.ClientURL] = true
			}
		}
		d := Decide(AdmitInput{ClusterFound: found, Members: members, DestinationProblem: problem, Age: time.Duration(ageSeconds) * time.Second})
		switch {
		case !found || problem != "":
			if d.Verdict != Refuse || d.Reason == "" || len(d.Members) > 0 {
				t.Fatalf("missing cluster or destination not refused: %+v", d)
			}
			return
		case len(usable) == 0:
			if d.Verdict == Admit || d.Reason != etcdv1alpha1.ReasonClusterUnavailable {
				t.Fatalf("admitted without a usable member: %+v", d)
			}
			return
		}
		if d.Verdict != Admit || len(d.Members) != len(usable) {
			t.Fatalf("decision %+v, usable %v", d, usable)
		}
		seenLeader := false
		for _, m := range d.Members {
			if !usable[m] {
				t.Fatalf("member %s is not usable", m)
			}
			leader := false
			for _, mm := range members {
				leader = leader || (mm.Leader && mm.Name+"="+mm.ClientURL == m)
			}
			if seenLeader && !leader {
				t.Fatalf("follower %s after the leader in %v", m, d.Members)
			}
			seenLeader = seenLeader || leader
		}
	})
}

// FuzzStoredObjectReader: whatever bytes a store returns (damaged, truncated, hostile), reading them as a stored
// snapshot ends in an error or in a snapshot that passed etcd's checksum; it never panics, and a snapshot
// written in any format reads back unchanged.
func FuzzStoredObjectReader(f *testing.F) {
	key, err := age.GenerateX25519Identity()
	if err != nil {
		f.Fatal(err)
	}
	keyed := Codec{Recipient: key.Recipient(), RecipientName: key.Recipient().String(), Identities: []age.Identity{key}}
	snap := snapshotBytes(4096)
	for _, c := range []Codec{{}, keyed, {Compression: etcdv1alpha1.CompressionNone}} {
		b, err := c.Encode(snap)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte("age-encryption.org/v1\n-> X25519 abc\n--- xyz\n"))
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, stored []byte) {
		r, _, err := keyed.Reader(bytes.NewReader(stored))
		if err != nil {
			return
		}
		defer func() { _ = r.Close() }()
		v := NewVerifier(io.LimitReader(r, 1<<20))
		out, err := io.ReadAll(v)
		if err == nil && !v.Verified() {
			t.Fatalf("read %d bytes without error and without a verified checksum", len(out))
		}
		_, _ = keyed.Decode(stored, 1<<20)
	})
}
