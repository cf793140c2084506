package pitr

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func testSegment() Segment {
	return Segment{
		Header: Header{ClusterID: "c0ffee", First: 10, Last: 14, FirstTime: t0, LastTime: t0.Add(3 * time.Second)},
		Events: []Event{
			{Revision: 10, Type: Put, Key: []byte("a"), Value: []byte("1"), Observed: t0},
			{Revision: 11, Type: Put, Key: []byte("b"), Value: []byte{0, 0xff, '\n'}, Lease: 7, LeaseTTL: 30, Observed: t0.Add(time.Second)},
			{Revision: 11, Type: Delete, Key: []byte("c"), Observed: t0.Add(time.Second)},
			{Revision: 13, Type: Delete, Key: []byte("a"), Observed: t0.Add(2 * time.Second)},
		},
	}
}

func TestSegmentRoundTrip(t *testing.T) {
	in := testSegment()
	b, err := Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if out.Header.Format != Format || out.Header.Events != 4 || out.Header.First != 10 || out.Header.Last != 14 {
		t.Fatalf("header %+v", out.Header)
	}
	for i, e := range out.Events {
		w := in.Events[i]
		if e.Revision != w.Revision || e.Type != w.Type || !bytes.Equal(e.Key, w.Key) || !bytes.Equal(e.Value, w.Value) ||
			e.Lease != w.Lease || e.LeaseTTL != w.LeaseTTL || !e.Observed.Equal(w.Observed) {
			t.Fatalf("event %d: %+v, want %+v", i, e, w)
		}
	}
	empty := Segment{Header: Header{ClusterID: "c0ffee", First: 15, Last: 14, FirstTime: t0, LastTime: t0.Add(time.Minute)}}
	b, err = Encode(empty)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(b); err != nil {
		t.Fatalf("empty segment: %v", err)
	}
}

func TestSegmentRefused(t *testing.T) {
	good, err := Encode(testSegment())
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 0x20
	lines := bytes.SplitAfter(good, []byte("\n"))
	dropEvent := bytes.Join(append(append([][]byte{}, lines[:2]...), lines[3:]...), nil)
	for name, b := range map[string][]byte{
		"empty":                {},
		"flipped bit":          flipped,
		"truncated":            good[:len(good)-10],
		"no trailer":           bytes.Join(lines[:len(lines)-2], nil),
		"event dropped":        dropEvent,
		"other format":         mustEncodeRaw(t, strings.Replace(string(bytes.Join(lines[:len(lines)-2], nil)), Format, "other/v1", 1)),
		"event out of order":   mustEncodeRaw(t, strings.Replace(string(bytes.Join(lines[:len(lines)-2], nil)), `"rev":13`, `"rev":9`, 1)),
		"event past last":      mustEncodeRaw(t, strings.Replace(string(bytes.Join(lines[:len(lines)-2], nil)), `"rev":13`, `"rev":15`, 1)),
		"unknown field":        mustEncodeRaw(t, strings.Replace(string(bytes.Join(lines[:len(lines)-2], nil)), `"rev":13`, `"rev":13,"x":1`, 1)),
		"count does not match": mustEncodeRaw(t, strings.Replace(string(bytes.Join(lines[:len(lines)-2], nil)), `"events":4`, `"events":5`, 1)),
	} {
		if _, err := Parse(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err %v, want ErrCorrupt", name, err)
		}
	}
	bad := testSegment()
	bad.Events[0].Type = "PATCH"
	if _, err := Encode(bad); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Encode of a bad event type: %v", err)
	}
}

// mustEncodeRaw adds a valid trailer to hand-edited lines, so that Parse gets past the checksum to the check
// under test.
func mustEncodeRaw(t *testing.T, body string) []byte {
	t.Helper()
	return append([]byte(body), trailerFor([]byte(body))...)
}

func TestRevisions(t *testing.T) {
	groups := Revisions(testSegment().Events)
	if len(groups) != 3 || len(groups[1]) != 2 || groups[1][0].Revision != 11 || groups[2][0].Revision != 13 {
		t.Fatalf("groups %+v", groups)
	}
}

func TestNames(t *testing.T) {
	h := testSegment().Header
	n := Name(h)
	r, ok := ParseName("some/dir/" + n)
	if !ok || r.First != 10 || r.Last != 14 || !r.LastTime.Equal(h.LastTime) || !r.Matches(h) || r.Name != n {
		t.Fatalf("ParseName(%q) = %+v, %v", n, r, ok)
	}
	for _, bad := range []string{"", "seg-1-2-x.seg", ".seg-" + n[4:], n + ".partial", "seg-00000000000000000000-00000000000000000000-20261125T120000.000000000Z.seg"} {
		if _, ok := ParseName(bad); ok {
			t.Errorf("ParseName(%q) accepted", bad)
		}
	}
	earlier := h
	earlier.First, earlier.Last = 9, 9
	if Name(earlier) >= n {
		t.Errorf("names do not sort by revision")
	}
}
