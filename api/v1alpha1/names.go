package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// MaxDerivedNameLength is the longest name Steward gives an object of its own kinds it derives from another's
// name: Steward labels the objects it makes for each with its name, and a label value holds at most 63
// characters.
const MaxDerivedNameLength = 63

// DerivedName is base+suffix, the name of an object Steward makes for base. When that is too long, base is cut
// and a hash of all of it takes the cut part's place, so that two long bases sharing a prefix still get two
// names. A name that fits is kept as it is: objects created before the cut existed keep their names.
func DerivedName(base, suffix string) string {
	if len(base)+len(suffix) <= MaxDerivedNameLength {
		return base + suffix
	}
	sum := sha256.Sum256([]byte(base))
	hash := "-" + hex.EncodeToString(sum[:])[:8]
	keep := max(0, MaxDerivedNameLength-len(suffix)-len(hash))
	return strings.TrimRight(base[:min(keep, len(base))], "-.") + hash + suffix
}
