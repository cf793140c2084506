package v1alpha1

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzDerivedName: for any object name (a DNS subdomain) and any of Steward's suffixes, the derived name is the
// plain concatenation when that fits, else at most 63 characters, a valid label value ending in the suffix; and
// two names that differ derive two names.
func FuzzDerivedName(f *testing.F) {
	f.Add("db", "db2", uint8(0))
	f.Add(strings.Repeat("a", 57), strings.Repeat("a", 56)+"b", uint8(1))
	f.Add(strings.Repeat("x", 60)+"-1", strings.Repeat("x", 60)+"-2", uint8(3))
	f.Add(strings.Repeat("a.", 120)+"b", "c", uint8(2))
	suffixes := []string{"-from-backup", "-pit", "-safety", "-auto-20261128t040000"}
	f.Fuzz(func(t *testing.T, a, b string, k uint8) {
		suffix := suffixes[int(k)%len(suffixes)]
		for _, base := range []string{a, b} {
			if len(validation.IsDNS1123Subdomain(base)) > 0 {
				return
			}
		}
		got := DerivedName(a, suffix)
		if len(a)+len(suffix) <= MaxDerivedNameLength {
			if got != a+suffix {
				t.Fatalf("DerivedName(%q, %q) = %q, want the name as it is", a, suffix, got)
			}
		} else if len(got) > MaxDerivedNameLength || !strings.HasSuffix(got, suffix) {
			t.Fatalf("DerivedName(%q, %q) = %q (%d characters)", a, suffix, got, len(got))
		}
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Fatalf("DerivedName(%q, %q) = %q: %v", a, suffix, got, errs)
		}
		if a != b && got == DerivedName(b, suffix) {
			t.Fatalf("%q and %q both derive %q", a, b, got)
		}
	})
}
